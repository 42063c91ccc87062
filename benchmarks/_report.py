"""Write a benchmark's results as JSON and Markdown, with the machine, versions and command."""

from __future__ import annotations

import json
import os
import platform
import statistics
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from importlib.metadata import version
from pathlib import Path
from typing import Any

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


def summary(samples: Sequence[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "median": statistics.median(ordered),
        "min": ordered[0],
        "max": ordered[-1],
        "n": len(ordered),
    }


def write(
    name: str, title: str, results: dict[str, Any], table: list[list[str]], notes: str
) -> None:
    RESULTS.mkdir(exist_ok=True)
    command = " ".join(["python -m", f"benchmarks.{Path(sys.argv[0]).stem}", *sys.argv[1:]])
    payload = {"command": command, "machine": machine(), **results}
    (RESULTS / f"{name}.json").write_text(json.dumps(payload, indent=2) + "\n")
    header, *rows = table
    lines = [
        f"# {title}",
        "",
        f"Command: `{command}` (from the repository root, in `.venv`).",
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
