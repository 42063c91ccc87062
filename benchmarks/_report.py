"""Write a benchmark's results as JSON and Markdown, with the machine, versions and command."""

from __future__ import annotations

import json
import os
import platform
import shlex
import statistics
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"
BANK_MARKETING_FILE = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "data"
    / "bank-marketing"
    / "bank-additional-full.csv"
)
MNIST_FOLDER = Path(__file__).resolve().parents[2] / "shared" / "data" / "mnist"


def machine() -> dict[str, Any]:
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "versions": {name: version(name) for name in ("scaletune", "xgboost-cpu", "numpy")},
    }


def paired_interval(
    differences: np.ndarray, rng: np.random.Generator, draws: int = 2000
) -> dict[str, float]:
    """The mean of paired differences and its bootstrap 95 % interval (pairs resampled)."""
    resampled = differences[rng.integers(0, len(differences), (draws, len(differences)))]
    low, high = np.percentile(resampled.mean(axis=1), [2.5, 97.5])
    return {"mean": float(differences.mean()), "low": float(low), "high": float(high)}


def gap_points(
    runs: Sequence[dict[str, Any]],
    baseline: dict[int, dict[str, Any]],
    key: str,
    rng: np.random.Generator,
) -> tuple[float, dict[str, float]]:
    """The runs' mean of `key` (an accuracy), and their paired difference from the baseline
    run of the same seed in points (x 100), with its bootstrap interval."""
    values = np.array([run[key] for run in runs])
    gaps = 100 * (values - np.array([baseline[run["seed"]][key] for run in runs]))
    return float(values.mean()), paired_interval(gaps, rng)


def interval_text(interval: dict[str, float]) -> str:
    return f"{interval['mean']:+.2f} [{interval['low']:+.2f}, {interval['high']:+.2f}]"


def summary(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median": statistics.median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "n": len(ordered),
    }


def spread(stats: dict[str, float], scale: float = 1.0, digits: int = 2) -> str:
    """'median (min-max)' of a summary, scaled (1000 for milliseconds)."""
    return (
        f"{stats['median'] * scale:.{digits}f} "
        f"({stats['min'] * scale:.{digits}f}–{stats['max'] * scale:.{digits}f})"
    )


@dataclass(frozen=True)
class Paired:
    """scaletune against a baseline, measured in alternating runs: the ratio of the medians,
    and the ratio within each back-to-back pair (how far noise alone moves it)."""

    plain: dict[str, float]
    ours: dict[str, float]
    ratio: float
    pairs: dict[str, float]

    @classmethod
    def of(cls, plain: Sequence[float], ours: Sequence[float]) -> Paired:
        a, b = summary(plain), summary(ours)
        pairs = summary([o / p for o, p in zip(ours, plain, strict=True)])
        return cls(a, b, b["median"] / a["median"], pairs)

    def results(self) -> dict[str, Any]:
        return {
            "stats_seconds": {"plain": self.plain, "scaletune": self.ours},
            "ratio_of_medians": self.ratio,
            "paired_ratios": self.pairs,
        }

    def pairs_row(self, width: int) -> list[str]:
        """The table's last row: the paired ratios, in the last of `width` columns."""
        return [
            "ratio within each back-to-back pair",
            *[""] * (width - 2),
            f"median {self.pairs['median']:.3f} ({self.pairs['min']:.3f}–{self.pairs['max']:.3f})",
        ]


def ratio_interval(
    plain: Sequence[float], ours: Sequence[float], seed: int = 0
) -> dict[str, float]:
    """The geometric mean of the ratios within back-to-back pairs (ours over plain), with a
    95 % BCa bootstrap interval over pairs: each pair shares the machine's state of the
    moment, so its ratio carries less of the machine's drift than either run alone."""
    from scipy.stats import bootstrap  # a benchmark's import: the CLI never loads it

    logs = np.log(np.asarray(ours) / np.asarray(plain))
    interval = bootstrap(
        (logs,), np.mean, confidence_level=0.95, method="BCa", rng=np.random.default_rng(seed)
    ).confidence_interval
    return {
        "ratio": float(np.exp(logs.mean())),
        "low": float(np.exp(interval.low)),
        "high": float(np.exp(interval.high)),
        "n": len(logs),
    }


def write(
    name: str,
    title: str,
    results: dict[str, Any],
    table: list[list[str]],
    notes: str,
    *,
    environment: str = ".venv",
) -> None:
    RESULTS.mkdir(exist_ok=True)
    command = " ".join(
        ["python -m", _module_of(Path(sys.argv[0])), *map(shlex.quote, sys.argv[1:])]
    )
    payload = {"command": command, "machine": machine(), **results}
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    header, *rows = table
    lines = [
        f"# {title}",
        "",
        f"Command: `{command}` (from the repository root, in `{environment}`).",
        f"Machine: {payload['machine']['cpus']} CPUs, {payload['machine']['platform']}, "
        f"Python {payload['machine']['python']}, {payload['machine']['date']}.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(row) + " |" for row in rows],
        "",
        notes.strip(),
        "",
    ]
    (RESULTS / f"{name}.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _module_of(script: Path) -> str:
    """benchmarks/overhead/decisions.py -> benchmarks.overhead.decisions"""
    relative = script.resolve().relative_to(RESULTS.parent.parent)
    return ".".join(relative.with_suffix("").parts)
