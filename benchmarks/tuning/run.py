"""Anytime performance on LCBench (YAHPO surrogate): scaletune's strategies against Optuna,
Ray Tune and Syne Tune, WORKERS trials at a time, on the same curves, costs and budget.

    .bench-venv/bin/python -m benchmarks.tuning.run            # 10 tasks x 10 seeds
    .bench-venv/bin/python -m benchmarks.tuning.run --tasks 2 --seeds 2   # a quick look
    .bench-venv/bin/python -m benchmarks.tuning.run --task-set other       # ten other tasks
    .bench-venv/bin/python -m benchmarks.tuning.run --task-set all \
        --only ASHA --only "Ray Tune ASHA" ...                          # all 34, some methods

Writes benchmarks/results/tuning_lcbench.{json,md,png} (tuning_lcbench_other.* for the other
tasks).
"""

from __future__ import annotations

import argparse
import functools
import json
import multiprocessing
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.metadata import version
from typing import Any

import numpy as np

from benchmarks._report import RESULTS, paired_interval
from benchmarks.tuning._problem import (
    BUDGET_FULL_TRIALS,
    COSTS,
    TASK_SETS,
    WORKERS,
    Task,
    load_task,
    stream_seed,
    streams_sentence,
)
from benchmarks.tuning._simulator import Trajectory, run_policy

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
    "Hyperband adaptive",
    "BOHB adaptive",
)
CONTROL = "scaletune HyperbandScheduler on Ray's draws (control)"
# Hyperband with scaletune's default settings: one bracket, stopping, LastValueTPE proposals
# (random ones, "ASHA", were the default before these measurements)
DEFAULT = "LastValueTPE ASHA"
PEERS = (
    CONTROL,
    "Optuna TPE+HyperbandPruner",
    "Ray Tune ASHA",
    "Ray Tune AsyncHyperBand",
    "Syne Tune ASHA",
    "Syne Tune BOHB",
)


@functools.cache
def _task(name: str) -> Task:
    return load_task(name)


def _run(method: str, task: Task, seed: int) -> tuple[Trajectory, int]:
    """The reports, and how many proposals fell outside the space (clipped to it)."""
    if method in OURS:
        from benchmarks.tuning._scaletune import run_scaletune

        return run_scaletune(method, task, seed), 0
    from benchmarks.tuning import _controls, _peers

    policies: dict[str, Callable[[], Any]] = {
        CONTROL: lambda: _controls.HyperbandPolicy(seed),
        "Optuna TPE+HyperbandPruner": lambda: _peers.OptunaPolicy(seed),
        "Ray Tune ASHA": lambda: _peers.RayPolicy(seed, brackets=1),
        "Ray Tune AsyncHyperBand": lambda: _peers.RayPolicy(seed, brackets=3),
        "Syne Tune ASHA": lambda: _peers.SynePolicy(seed, "ASHA"),
        "Syne Tune BOHB": lambda: _peers.SynePolicy(seed, "BOHB"),
    }
    policy = policies[method]()
    return run_policy(policy, task, WORKERS), getattr(policy, "clipped", 0)


def _one(job: tuple[str, str, int]) -> dict[str, Any]:
    method, task_name, seed = job
    task = _task(task_name)
    started = time.perf_counter()
    trajectory, clipped = _run(method, task, stream_seed(task_name, seed))
    seconds = time.perf_counter() - started
    times = np.array([t for t, _ in trajectory]) / task.budget_seconds
    best = np.maximum.accumulate(np.array([v for _, v in trajectory]))
    incumbent = [float(best[times <= f][-1]) if (times <= f).any() else None for f in GRID]
    return {
        "method": method,
        "task": task_name,
        "seed": seed,  # the replicate; its stream: stream_seed
        "stream_seed": stream_seed(task_name, seed),
        "budget_seconds": task.budget_seconds,
        "reports": len(trajectory),
        "run_seconds": seconds,
        "clipped_proposals": clipped,
        # best val_accuracy (%) reported by each fraction of GRID; 4 decimals keep the file
        # small (34 tasks x 10 seeds x 7 methods) and every figure drawn from it exact
        "incumbent": [None if value is None else round(value, 4) for value in incumbent],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task-set", choices=sorted(TASK_SETS), default="first")
    parser.add_argument("--tasks", type=int, help="the set's first N tasks (default: all)")
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument(
        "--summarize",
        action="store_true",
        help="only rebuild the table, intervals and plot from the committed JSON",
    )
    parser.add_argument(
        "--only",
        action="append",
        choices=(*OURS, *PEERS),
        help="run just these methods; the others' runs are kept from the committed JSON",
    )
    args = parser.parse_args()
    name = "tuning_lcbench" if args.task_set == "first" else f"tuning_lcbench_{args.task_set}"
    if args.summarize:
        committed = json.loads((RESULTS / f"{name}.json").read_text())
        runs = committed["runs"]
        _write(runs, _summarize(runs, committed["seeds"]), args, 0.0, name, committed)
        return
    methods = args.only or (*OURS, *PEERS)
    jobs = [
        (method, task, seed)
        for task in TASK_SETS[args.task_set][: args.tasks]
        for seed in range(args.seeds)
        for method in methods
    ]
    kept = _kept_runs(jobs, name) if args.only else []
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
        runs = kept + pool.map(_one, jobs, chunksize=1)
    summary = _summarize(runs, args.seeds)
    _write(runs, summary, args, time.perf_counter() - started, name)


def _kept_runs(jobs: list[tuple[str, str, int]], name: str) -> list[dict[str, Any]]:
    """The committed runs of the methods not run again, for the same tasks and seeds."""
    rerun = {method for method, _, _ in jobs}
    wanted = {(task, seed) for _, task, seed in jobs}
    path = RESULTS / f"{name}.json"
    committed = json.loads(path.read_text())["runs"] if path.exists() else []
    kept = [
        run
        for run in committed
        if run["method"] not in rerun
        and (run["task"], run["seed"]) in wanted
        and run.get("stream_seed") == stream_seed(run["task"], run["seed"])  # not a shared one
    ]
    order = {method: index for index, method in enumerate((*OURS, *PEERS))}
    return sorted(kept, key=lambda run: order[run["method"]])


def _at(run: dict[str, Any], fraction: float) -> float:
    index = int(np.argmin(np.abs(GRID - fraction)))
    value = run["incumbent"][index]
    return float("-inf") if value is None else float(value)


def _summarize(runs: list[dict[str, Any]], seeds: int) -> dict[str, Any]:
    best_known: dict[str, float] = {}
    for run in runs:
        final = _at(run, 1.0)
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
                (t, s): best_known[t] - _at(by_key[(method, t, s)], fraction)
                for t in tasks
                for s in range(seeds)
            }
            per_seed = [statistics.fmean(regrets[(t, s)] for t in tasks) for s in range(seeds)]
            ranks = []
            for t in tasks if method in ranked else ():
                for s in range(seeds):
                    values = sorted(
                        best_known[t] - _at(by_key[(m, t, s)], fraction) for m in ranked
                    )
                    ranks.append(1 + values.index(regrets[(t, s)]))
            entry["checkpoints"][str(fraction)] = {
                "mean_regret": statistics.fmean(regrets.values()),
                "std_over_seeds": statistics.stdev(per_seed) if len(per_seed) > 1 else 0.0,
                "mean_rank": statistics.fmean(ranks) if method in ranked else None,
            }
        for index in range(len(GRID)):
            values = [
                best_known[t] - (by_key[(method, t, s)]["incumbent"][index] or 0.0)
                for t in tasks
                for s in range(seeds)
            ]
            entry["regret_curve"].append(statistics.fmean(values))
        entry["median_run_seconds"] = statistics.median(
            r["run_seconds"] for r in runs if r["method"] == method
        )
        summary["methods"][method] = entry
    summary["comparisons"] = _comparisons(by_key, best_known, methods, seeds)
    return summary


def _comparisons(
    by_key: dict[tuple[str, str, int], dict[str, Any]],
    best_known: dict[str, float],
    methods: list[str],
    seeds: int,
) -> dict[str, Any]:
    """At each checkpoint, scaletune's best method there (and its default) minus each
    peer: the mean difference of regret over (task, seed) pairs, with a paired bootstrap 95 %
    interval (pairs resampled 2,000 times). Below zero: scaletune's regret is lower."""
    rng = np.random.default_rng(0)
    pairs = [(task, seed) for task in best_known for seed in range(seeds)]
    ours = [m for m in methods if m in OURS]
    peers = [m for m in methods if m in PEERS and m != CONTROL]
    result: dict[str, Any] = {}
    for fraction in CHECKPOINTS:

        def regrets(method: str, fraction: float = fraction) -> np.ndarray:
            return np.array(
                [best_known[t] - _at(by_key[(method, t, s)], fraction) for t, s in pairs]
            )

        best = min(ours, key=lambda m: float(regrets(m).mean()))
        rows: dict[str, Any] = {}
        for mine in dict.fromkeys([best, DEFAULT]):
            if mine not in ours:
                continue
            for peer in peers:
                rows[f"{mine} - {peer}"] = paired_interval(regrets(mine) - regrets(peer), rng)
        result[str(fraction)] = {"best_scaletune": best, "differences": rows}
    return result


def _versions() -> dict[str, str]:
    names = ("scaletune", "optuna", "ray", "syne-tune", "yahpo-gym", "onnxruntime", "numpy")
    return {name: version(name) for name in names}


def _write(
    runs: list[dict[str, Any]],
    summary: dict[str, Any],
    args: Any,
    wall: float,
    name: str,
    committed: dict[str, Any] | None = None,
) -> None:
    """`committed`: the results summarised again (`--summarize`): what made them is kept."""
    import platform

    RESULTS.mkdir(exist_ok=True)
    command = ("python -m benchmarks.tuning.run " + shlex.join(sys.argv[1:])).strip()
    earlier: dict[str, Any] = {}
    if args.only and any(run["method"] not in args.only for run in runs):
        # the other methods' runs came from the committed results' command, and its note holds
        earlier = json.loads((RESULTS / f"{name}.json").read_text())
        command = f"{earlier['command']}` then `{command}"
    meta = {
        "command": command,
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "versions": _versions(),
        "tasks": list(TASK_SETS[args.task_set][: args.tasks]),
        "seeds": args.seeds,
        "workers": WORKERS,
        "budget": f"{BUDGET_FULL_TRIALS} median-length full trials per worker",
        "start_seconds_per_trial": COSTS.start_seconds,
        "benchmark_wall_seconds": wall,
        **({"note": earlier["note"]} if "note" in earlier else {}),
    }
    if committed is not None:
        for key in ("command", "date", "python", "platform", "versions", "benchmark_wall_seconds"):
            meta[key] = committed[key]
        wall = committed["benchmark_wall_seconds"]
        if "note" in committed:
            meta["note"] = committed["note"]
    (RESULTS / f"{name}.json").write_text(  # compact: every run's incumbent curve is in it
        json.dumps({**meta, "summary": summary, "runs": runs}, separators=(",", ":")) + "\n"
    )
    _plot(summary, name)
    methods = summary["methods"]
    header = [
        "method",
        *[f"regret at {int(f * 100)} %" for f in CHECKPOINTS],
        "mean rank 25/50/100 %",
    ]
    rows = []
    for method, entry in methods.items():
        cells = [f"scaletune {method}" if method in OURS else method]
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
        f"Tasks ({args.task_set} set): {', '.join(meta['tasks'])}.",
        *([f"Note: {meta['note']}"] if "note" in meta else []),
        "",
        f"{len(meta['tasks'])} tasks × {args.seeds} seeds, {WORKERS} trials at a time, "
        f"budget {meta['budget']} (simulated), {COSTS.start_seconds:g} s start-up per trial "
        "for every method. Regret: the best validation accuracy (%) any method found on the "
        "task minus the best this run had reported by then; mean over tasks and seeds ± the "
        "standard deviation over seeds of the mean over tasks. Rank: 1 = best of all methods "
        "on that task and seed (the control not counted). scaletune's methods name their "
        "Hyperband settings: ASHA is one bracket of asynchronous successive halving with "
        "random proposals, the others say how they differ from it; the default is "
        f"{DEFAULT}. The control runs scaletune's Hyperband scheduler on exactly the random "
        "configurations Ray Tune's methods draw. " + streams_sentence(runs),
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(row) + " |" for row in rows],
        "",
        f"![regret over the budget]({name}.png)",
        "",
        *_comparison_lines(summary["comparisons"]),
    ]
    (RESULTS / f"{name}.md").write_text("\n".join(lines))
    print("\n".join(lines))


def _comparison_lines(comparisons: dict[str, Any]) -> list[str]:
    lines = [
        f"Regret of scaletune's best method at each checkpoint (and of its default, {DEFAULT}) "
        "minus each peer's: mean over tasks and seeds [paired bootstrap 95 % interval]; "
        "below zero, scaletune is ahead.",
        "",
        "| at | difference | mean [95 % interval] |",
        "|---|---|---|",
    ]
    for fraction, entry in comparisons.items():
        for label, row in entry["differences"].items():
            lines.append(
                f"| {int(float(fraction) * 100)} % | scaletune {label} | "
                f"{row['mean']:+.3f} [{row['low']:+.3f}, {row['high']:+.3f}] |"
            )
    return [*lines, ""]


def _plot(summary: dict[str, Any], name: str) -> None:
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
    axes.set_title("LCBench, 4 parallel workers: lower is better")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(RESULTS / f"{name}.png", dpi=110)


if __name__ == "__main__":
    main()
