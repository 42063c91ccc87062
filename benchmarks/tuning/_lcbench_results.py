"""The LCBench benchmark's results: regret at each checkpoint, ranks, paired intervals
against each peer, and the files that hold them (JSON, Markdown, a plot)."""

from __future__ import annotations

import json
import statistics
from collections.abc import Mapping
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

import numpy as np

from benchmarks._report import RESULTS, paired_interval
from benchmarks.tuning._problem import COMMITTED, SETTINGS, Setting, streams_sentence

CHECKPOINTS = (0.25, 0.5, 1.0)
GRID = np.linspace(0.02, 1.0, 50)  # fractions of the budget, for the plot
OURS = (
    "Random",
    "Bayesian",
    "Hyperband",
    "Bayesian+Hyperband",
    "Hyperband promotion",
    "ASHA",
    "ASHA middle first",
    "ASHA promotion",
    "Bayesian+ASHA promotion",
    "BOHB",
    "BOHB ASHA",
    "BOHB ASHA promotion",
    "LastValueTPE ASHA",
    "LastValueTPE ASHA forecast",
    "LastValueCQR ASHA",
    "LastValueCQR ASHA forecast",
    "LastValueTPEThenCQR ASHA forecast",
    "Hyperband adaptive",
    "BOHB adaptive",
)
CONTROL = "scaletune HyperbandScheduler on Ray's draws (control)"
# Hyperband with scaletune's default settings: one bracket, stopping, LastValueTPE proposals
# until 32 trials have values and LastValueCQR's after, rungs ranking by forecast (before
# these measurements: random proposals, "ASHA", then LastValueTPE with rungs ranking values,
# then the same with rungs ranking forecasts)
DEFAULT = "LastValueTPEThenCQR ASHA forecast"
TPE_THROUGHOUT = "LastValueTPE ASHA forecast"  # the default but for the hand-off to CQR
VALUE_RANKED = "LastValueTPE ASHA"  # TPE_THROUGHOUT but for its rungs: each trial's value there
RANDOM_PROPOSALS = "ASHA"  # VALUE_RANKED's scheduler with random proposals
# What each part of the default adds: (a method, the same without that part, the part, what
# stands in for it, the seed of a bootstrap generator of its own, so that no row moves
# another's interval).
ABLATIONS = (
    (VALUE_RANKED, RANDOM_PROPOSALS, "the model", "random proposals instead", 1),
    (TPE_THROUGHOUT, VALUE_RANKED, "ranking by forecast", "rungs ranking values instead", 2),
    (DEFAULT, TPE_THROUGHOUT, "the hand-off to CQR", "LastValueTPE throughout", 3),
)
TOP_K = "Top-K after the first rung (baseline)"
PEERS = (
    CONTROL,
    "Optuna TPE+HyperbandPruner",
    "Ray Tune ASHA",
    "Ray Tune AsyncHyperBand",
    "Syne Tune ASHA",
    "Syne Tune BOHB",
    "Syne Tune ASHA-CQR",
    "Syne Tune ASHA-BORE",
    "DEHB",
    TOP_K,
)
# The package each method's code comes from (the results name it with its version).
PACKAGES = {"Optuna": "optuna", "Ray Tune": "ray", "Syne Tune": "syne-tune", "DEHB": "dehb"}
SIGNIFICANCE = 0.05  # two-sided, Wilcoxon signed-rank over (task, seed) pairs


def package_of(method: str) -> str:
    """The distribution that runs `method`: a peer's library, else scaletune (its own
    methods, the control and the top-K baseline run on scaletune's code)."""
    return next((pkg for prefix, pkg in PACKAGES.items() if method.startswith(prefix)), "scaletune")


def setting_of(runs: list[dict[str, Any]]) -> Setting:
    """The one setting all runs were made at (runs from before settings: the committed one).
    ValueError: runs of several settings, which no comparison may mix."""
    names = {run.get("setting", COMMITTED.name) for run in runs}
    if len(names) > 1:
        raise ValueError(f"runs of several settings ({', '.join(sorted(names))}): keep them apart")
    return SETTINGS[names.pop()] if names else COMMITTED


def incumbent_curve(best_by_fraction: list[float | None]) -> list[float | None]:
    """A run's incumbent (its best value reported by each fraction of GRID; None before its
    first report) as the results hold it: without its flat tail, the last value holding to the
    end. Most runs stop improving well before the budget ends: this cuts the files by a
    quarter."""
    curve = list(best_by_fraction)
    while len(curve) > 1 and curve[-1] == curve[-2]:
        curve.pop()
    return curve


def incumbent(run: Mapping[str, Any], index: int) -> float | None:
    """The run's incumbent at GRID[index] (see incumbent_curve)."""
    curve: list[float | None] = run["incumbent"]
    return curve[min(index, len(curve) - 1)]


def at(run: Mapping[str, Any], fraction: float) -> float:
    value = incumbent(run, int(np.argmin(np.abs(GRID - fraction))))
    return float("-inf") if value is None else float(value)


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    seeds = sorted({run["seed"] for run in runs})
    best_known: dict[str, float] = {}
    for run in runs:
        final = at(run, 1.0)
        best_known[run["task"]] = max(best_known.get(run["task"], final), final)
    order = (*OURS, *PEERS)
    methods = sorted({run["method"] for run in runs}, key=order.index)
    ranked = [method for method in methods if method != CONTROL]  # the control is not a rival
    by_key = {(r["method"], r["task"], r["seed"]): r for r in runs}
    tasks = list(best_known)
    summary: dict[str, Any] = {"best_known": best_known, "methods": {}}
    for method in methods:
        entry: dict[str, Any] = {"checkpoints": {}, "regret_curve": []}
        for fraction in (*CHECKPOINTS,):
            # regret per (task, seed); its spread: the std over seeds of the mean over tasks
            regrets = {
                (t, s): best_known[t] - at(by_key[(method, t, s)], fraction)
                for t in tasks
                for s in seeds
            }
            per_seed = [statistics.fmean(regrets[(t, s)] for t in tasks) for s in seeds]
            ranks = []
            for t in tasks if method in ranked else ():
                for s in seeds:
                    values = sorted(best_known[t] - at(by_key[(m, t, s)], fraction) for m in ranked)
                    ranks.append(1 + values.index(regrets[(t, s)]))
            entry["checkpoints"][str(fraction)] = {
                "mean_regret": statistics.fmean(regrets.values()),
                "std_over_seeds": statistics.stdev(per_seed) if len(per_seed) > 1 else 0.0,
                "mean_rank": statistics.fmean(ranks) if method in ranked else None,
            }
        for index in range(len(GRID)):
            values = [
                best_known[t] - (incumbent(by_key[(method, t, s)], index) or 0.0)
                for t in tasks
                for s in seeds
            ]
            entry["regret_curve"].append(statistics.fmean(values))
        entry["median_run_seconds"] = statistics.median(
            r["run_seconds"] for r in runs if r["method"] == method
        )
        summary["methods"][method] = entry
    summary["comparisons"] = _comparisons(by_key, best_known, methods, seeds)
    summary["ablations"] = {
        f"{method} - {without}": {
            "part": part,
            "instead": instead,
            "differences": _minus(by_key, best_known, seeds, method, without, rng_seed),
        }
        for method, without, part, instead, rng_seed in ABLATIONS
        if {method, without} <= set(methods)
    }
    return summary


def _comparisons(
    by_key: dict[tuple[str, str, int], dict[str, Any]],
    best_known: dict[str, float],
    methods: list[str],
    seeds: list[int],
) -> dict[str, Any]:
    """At each checkpoint, scaletune's best method there (and its default) minus each
    peer: the mean difference of regret over (task, seed) pairs, with a paired bootstrap 95 %
    interval (pairs resampled 2,000 times) and the two-sided Wilcoxon signed-rank test's p
    (zero differences dropped). Below zero: scaletune's regret is lower. The peer with the
    lowest mean regret there is named: the one the default must lead."""
    rng = np.random.default_rng(0)
    pairs = [(task, seed) for task in best_known for seed in seeds]
    ours = [m for m in methods if m in OURS]
    peers = [m for m in methods if m in PEERS and m != CONTROL]
    result: dict[str, Any] = {}
    for fraction in CHECKPOINTS:

        def regrets(method: str, fraction: float = fraction) -> np.ndarray:
            return np.array(
                [best_known[t] - at(by_key[(method, t, s)], fraction) for t, s in pairs]
            )

        best = min(ours, key=lambda m: float(regrets(m).mean()))
        rows: dict[str, Any] = {}
        for mine in dict.fromkeys([best, DEFAULT]):
            if mine not in ours:
                continue
            for peer in peers:
                differences = regrets(mine) - regrets(peer)
                rows[f"{mine} - {peer}"] = {
                    **paired_interval(differences, rng),
                    "wilcoxon_p": _wilcoxon_p(differences),
                }
        best_peer = min(peers, key=lambda m: float(regrets(m).mean())) if peers else None
        result[str(fraction)] = {
            "best_scaletune": best,
            "best_peer": best_peer,
            "differences": rows,
        }
    return result


def _wilcoxon_p(differences: np.ndarray) -> float:
    """The two-sided Wilcoxon signed-rank test's p for a zero median difference (1.0 when
    every difference is zero)."""
    from scipy.stats import wilcoxon

    if not np.any(differences):
        return 1.0
    return float(wilcoxon(differences, zero_method="wilcox").pvalue)


def _minus(
    by_key: dict[tuple[str, str, int], dict[str, Any]],
    best_known: dict[str, float],
    seeds: list[int],
    method: str,
    without: str,
    rng_seed: int,
) -> dict[str, Any]:
    """`method`'s regret minus `without`'s at each checkpoint, paired over (task, seed)."""
    rng = np.random.default_rng(rng_seed)
    pairs = [(task, seed) for task in best_known for seed in seeds]
    return {
        str(fraction): paired_interval(
            np.array(
                [
                    at(by_key[(without, t, s)], fraction) - at(by_key[(method, t, s)], fraction)
                    for t, s in pairs
                ]
            ),
            rng,
        )
        for fraction in CHECKPOINTS
    }


def _versions() -> dict[str, str]:
    names = ("scaletune", "optuna", "ray", "syne-tune", "dehb", "yahpo-gym", "onnxruntime", "numpy")
    return {name: version(name) for name in names}


def provenance(command: str, wall: float, note: str | None = None) -> dict[str, Any]:
    """What made a results file: the command, when, where, with which versions."""
    import platform

    return {
        "command": command,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": _versions(),
        "benchmark_wall_seconds": wall,
        **({"note": note} if note else {}),
    }


def kept_provenance(committed: dict[str, Any]) -> dict[str, Any]:
    """A committed file's provenance, for its runs summarised again."""
    keys = ("command", "date", "python", "platform", "versions", "benchmark_wall_seconds", "note")
    return {key: committed[key] for key in keys if key in committed}


def load_runs(name: str) -> list[dict[str, Any]]:
    """A results file's runs; a pooled file's, from the files it pooled."""
    committed = json.loads((RESULTS / f"{name}.json").read_text())
    if "pooled_from" in committed:
        return pooled_runs(committed["pooled_from"])
    runs: list[dict[str, Any]] = committed["runs"]
    return runs


def pooled_runs(names: list[str]) -> list[dict[str, Any]]:
    """Several results files' runs as one set: the methods run on every (task, seed) pair of
    them all, so that every comparison stays paired. ValueError: a run in two of them, or no
    method on every pair."""
    runs = [run for source in names for run in load_runs(source)]
    keys = [(run["method"], run["task"], run["seed"]) for run in runs]
    if len(set(keys)) < len(keys):
        twice = next(key for key in keys if keys.count(key) > 1)
        raise ValueError(f"--pool {' '.join(names)}: {twice} is in more than one of them")
    pairs = {(run["task"], run["seed"]) for run in runs}
    complete = [
        method
        for method in dict.fromkeys(run["method"] for run in runs)
        if {(r["task"], r["seed"]) for r in runs if r["method"] == method} == pairs
    ]
    if not complete:
        raise ValueError(f"--pool {' '.join(names)}: no method ran on every (task, seed) pair")
    return [run for run in runs if run["method"] in complete]


def write(
    runs: list[dict[str, Any]],
    summary: dict[str, Any],
    name: str,
    made_by: dict[str, Any],
    *,
    pooled_from: list[str] | None = None,
) -> None:
    """benchmarks/results/NAME.{json,md,png}; `made_by`: `provenance` or `kept_provenance`.
    A pooled file names its sources instead of holding their runs a second time."""
    RESULTS.mkdir(exist_ok=True)
    setting = setting_of(runs)
    meta = {
        **made_by,
        "tasks": list(dict.fromkeys(run["task"] for run in runs)),
        "seeds": sorted({run["seed"] for run in runs}),
        "setting": setting.name,
        "workers": setting.workers,
        "budget": f"{setting.budget_full_trials:g} median-length full trials per worker",
        "start_seconds_per_trial": setting.start_seconds,
    }
    wall = meta["benchmark_wall_seconds"]
    held = {"pooled_from": pooled_from} if pooled_from else {"runs": runs}
    (RESULTS / f"{name}.json").write_text(  # compact: every run's incumbent curve is in it
        json.dumps({**meta, "summary": summary, **held}, separators=(",", ":")) + "\n"
    )
    _plot(summary, name, setting)
    methods = summary["methods"]
    versions = meta["versions"]
    header = [
        "method",
        "package",
        *[f"regret at {int(f * 100)} %" for f in CHECKPOINTS],
        "mean rank 25/50/100 %",
    ]
    rows = []
    for method, entry in methods.items():
        package = package_of(method)
        cells = [
            f"scaletune {method}" if method in OURS else method,
            f"{package} {versions.get(package, '?')}",
        ]
        for fraction in CHECKPOINTS:
            point = entry["checkpoints"][str(fraction)]
            cells.append(f"{point['mean_regret']:.3f} ± {point['std_over_seeds']:.3f}")
        ranks = [entry["checkpoints"][str(f)]["mean_rank"] for f in CHECKPOINTS]
        cells.append(" / ".join("-" if rank is None else f"{rank:.2f}" for rank in ranks))
        rows.append(cells)
    lines = [
        "# Tuning on LCBench (YAHPO Gym surrogate): scaletune against Optuna, Ray Tune, Syne Tune",
        "",
        f"Command: `{meta['command']}` (from the repository root, in `.bench-venv`; "
        f"{wall / 60:.0f} min).",
        f"Machine: {meta['platform']}, Python {meta['python']}, {meta['date']}. Versions: "
        + ", ".join(f"{k} {v}" for k, v in meta["versions"].items())
        + ".",
        f"Tasks: {', '.join(meta['tasks'])}.",
        *([f"Note: {meta['note']}"] if "note" in meta else []),
        "",
        f"{len(meta['tasks'])} tasks × {_seeds_phrase(meta['seeds'])}, the {setting.name} "
        f"setting: {setting.sentence()}, for every method (simulated time). Regret: the best "
        "validation accuracy (%) any method found on the task minus the best this run had "
        "reported by then; mean over tasks and seeds ± the "
        "standard deviation over seeds of the mean over tasks. Rank: 1 = best of all methods "
        "on that task and seed (the control not counted). scaletune's methods name their "
        "Hyperband settings: ASHA is one bracket of asynchronous successive halving with "
        "random proposals, the others say how they differ from it; the default is "
        f"{DEFAULT}. The control runs scaletune's Hyperband scheduler on exactly the random "
        "configurations Ray Tune's methods draw. DEHB trains each of its jobs from scratch to "
        "the job's fidelity; the top-K baseline screens random configurations at the first "
        "rung with half the budget, then trains the best of them to the end, best first. "
        + streams_sentence(runs),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(row) + " |" for row in rows],
        "",
        f"![regret over the budget]({name}.png)",
        "",
        *_comparison_lines(summary["comparisons"]),
        *_lead_lines(summary),
        *_ablation_lines(summary.get("ablations", {})),
    ]
    (RESULTS / f"{name}.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _seeds_phrase(seeds: list[int]) -> str:
    first, last = min(seeds), max(seeds)
    if seeds == list(range(first, last + 1)) and first > 0:
        return f"{len(seeds)} seeds ({first}..{last})"
    return f"{len(seeds)} seeds"


def _comparison_lines(comparisons: dict[str, Any]) -> list[str]:
    lines = [
        f"Regret of scaletune's best method at each checkpoint (and of its default, {DEFAULT}) "
        "minus each peer's: mean over tasks and seeds [paired bootstrap 95 % interval]; "
        "below zero, scaletune is ahead. p: the two-sided Wilcoxon signed-rank test over the "
        "(task, seed) pairs (zero differences dropped).",
        "",
        "| at | difference | mean [95 % interval] | Wilcoxon p |",
        "|---|---|---|---|",
    ]
    for fraction, entry in comparisons.items():
        for label, row in entry["differences"].items():
            p = row.get("wilcoxon_p")
            lines.append(
                f"| {int(float(fraction) * 100)} % | scaletune {label} | "
                f"{row['mean']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}] | "
                + ("-" if p is None else f"{p:.2g}")
                + " |"
            )
    return [*lines, ""]


def _lead_lines(summary: dict[str, Any]) -> list[str]:
    """The issue's goals, answered at each checkpoint: is the default's mean regret the
    lowest of all methods, and is its lead over the best peer significant?"""
    methods = summary["methods"]
    if DEFAULT not in methods:
        return []
    lines = ["Does the default lead?", ""]
    for fraction, entry in summary["comparisons"].items():
        peer = entry.get("best_peer")
        row = entry["differences"].get(f"{DEFAULT} - {peer}")
        if peer is None or row is None or "wilcoxon_p" not in row:
            continue
        regret = {m: e["checkpoints"][fraction]["mean_regret"] for m, e in methods.items()}
        lowest = min((m for m in regret if m != CONTROL), key=regret.__getitem__)
        ahead = row["mean"] < 0
        significant = ahead and row["wilcoxon_p"] < SIGNIFICANCE
        verdict = (
            f"a significant lead (p < {SIGNIFICANCE:g})"
            if significant
            else f"ahead, not significantly (p ≥ {SIGNIFICANCE:g})"
            if ahead
            else "behind"
        )
        lines.append(
            f"- at {int(float(fraction) * 100)} %: "
            + ("the lowest mean regret" if lowest == DEFAULT else f"not the lowest ({lowest} is)")
            + f"; against the best peer, {peer}, {row['mean']:+.3f} points, p = "
            f"{row['wilcoxon_p']:.2g}: " + verdict + "."
        )
    return [*lines, ""]


def _ablation_lines(ablations: dict[str, Any]) -> list[str]:
    lines = []
    for label, entry in ablations.items():
        cells = [
            f"{int(float(f) * 100)} %: {r['mean']:+.3f} [{r['low']:+.3f}, {r['high']:+.3f}]"
            for f, r in entry["differences"].items()
        ]
        method, without = label.split(" - ")
        lines += [
            f"What {entry['part']} adds: {method} minus {without} ({entry['instead']}), "
            f"regret, paired as above: {'; '.join(cells)}.",
            "",
        ]
    return lines


def _plot(summary: dict[str, Any], name: str, setting: Setting) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(8, 5))
    for method, entry in summary["methods"].items():
        label = f"scaletune {method}" if method in OURS else method
        style = "-" if method in OURS else ":" if method == CONTROL else "--"
        axes.plot(GRID * 100, np.maximum(entry["regret_curve"], 1e-3), style, label=label)
    axes.set_yscale("log")
    axes.set_xlabel("simulated wall time (% of budget)")
    axes.set_ylabel("mean regret of best val accuracy (% points)")
    axes.set_title(f"LCBench, {setting.workers} trials at a time: lower is better")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=110)
