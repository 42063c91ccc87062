"""Where Syne Tune's ASHA lead on LCBench comes from (issue 16): its rung's rule, or its draws.

One bracket of asynchronous successive halving (rungs at epochs 2, 6, 18; eta = 3), stopping
type, under three rules for whether a trial that reaches a rung goes on, n being the values the
rung holds with its own:

- best n // eta: among the best max(1, n // eta) (scaletune's HyperbandScheduler until now);
- percentile: at least the (1 - 1/eta) percentile of the values before it (Ray Tune's ASHA);
- rank <= 1/eta: at most n / eta of them better (Syne Tune's ASHA; it keeps n // eta + 1).

Each rule runs on two streams of random configurations: Ray Tune's (the harness's draws) and
Syne Tune's (its ASHA's searcher, fed every report as its own loop feeds it). Before anything
is reported, each rule on its library's draws must reproduce that library's run report for
report: scaletune's scheduler, Ray Tune's ASHA and Syne Tune's ASHA.

    .bench-venv/bin/python -m benchmarks.tuning.rung_rule --task-set other

Writes benchmarks/results/tuning_rung_rule_<task set>.{json,md}."""

from __future__ import annotations

import argparse
import bisect
import functools
import json
import multiprocessing
import shlex
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np

from benchmarks._report import RESULTS, paired_interval
from benchmarks.tuning._problem import (
    EPOCHS,
    MIN_RESOURCE,
    TASK_SETS,
    WORKERS,
    Task,
    load_task,
    random_config,
    stream_seed,
    streams_sentence,
)
from benchmarks.tuning._simulator import Policy, Trajectory, run_policy

ETA = 3
RUNGS = tuple(MIN_RESOURCE * ETA**k for k in range(3))  # 2, 6, 18: below EPOCHS = 52
CHECKPOINTS = (0.25, 0.5, 1.0)


def _best_n_over_eta(value: float, before: list[float]) -> bool:
    n = len(before) + 1
    better = len(before) - bisect.bisect_right(before, value)
    return better < max(1, n // ETA)


def _percentile(value: float, before: list[float]) -> bool:
    return not before or value >= float(np.nanpercentile(before, (1 - 1 / ETA) * 100))


def _rank_within(value: float, before: list[float]) -> bool:
    n = len(before) + 1
    better = len(before) - bisect.bisect_right(before, value)
    return better <= n / ETA


RULES: dict[str, Callable[[float, list[float]], bool]] = {
    "best n // eta": _best_n_over_eta,
    "percentile": _percentile,
    "rank <= 1/eta": _rank_within,
}
# The third: the harness's generator on other seeds (replicate + 1000), an independent stream of the
# same distribution as the first, to tell a gap between streams from chance.
DRAWS = ("Ray Tune's draws", "Syne Tune's draws", "the harness's draws, other seeds")
OTHER_SEEDS = 1000
BASELINE = "best n // eta"


class RulePolicy:
    """Stopping-type successive halving under one rule, on one library's draws."""

    def __init__(self, seed: int, rule: str, draws: str) -> None:
        from benchmarks.tuning import _peers

        self.goes_on = RULES[rule]
        self.recorded: dict[int, list[float]] = {rung: [] for rung in RUNGS}
        self.next_rung: dict[int, int] = {}
        self.syne: Policy | None = None
        if draws != DRAWS[1]:
            # As RayPolicy draws (the other-seeds stream: `_one` passes another seed).
            rng = np.random.default_rng(seed)
            self.count = 0

            def ray_draw() -> tuple[int, dict[str, object]]:
                self.count += 1
                return self.count - 1, random_config(rng)

            self.draw = ray_draw
        else:
            self.syne = _peers.SynePolicy(seed, "ASHA")
            self.draw = self.syne.suggest

    def suggest(self) -> tuple[int, dict[str, object]]:
        return self.draw()

    def on_report(self, trial: int, epoch: int, value: float) -> bool:
        if self.syne is not None:  # its searcher sees every report; its verdict is not used
            self.syne.on_report(trial, epoch, value)
        if epoch >= EPOCHS:
            return False
        index = self.next_rung.setdefault(trial, 0)
        if index >= len(RUNGS) or epoch < RUNGS[index]:
            return True
        self.next_rung[trial] = index + 1
        before = self.recorded[RUNGS[index]]
        verdict = self.goes_on(value, before)
        bisect.insort(before, value)
        return verdict

    def on_end(self, trial: int, epoch: int, value: float, stopped: bool) -> None:
        if self.syne is not None:
            self.syne.on_end(trial, epoch, value, stopped)


def check_reproduces_the_libraries(task: Task, seed: int) -> None:
    """Each rule, on its own library's draws, is that library's scheduler, report for report."""
    from benchmarks.tuning import _controls, _peers

    # Made just before each run: Ray Tune's and Syne Tune's draws use numpy's global generator,
    # which each seeds as it is made.
    libraries: list[tuple[str, str, Callable[[], Policy]]] = [
        (BASELINE, DRAWS[0], lambda: _controls.HyperbandPolicy(seed, brackets=1)),
        ("percentile", DRAWS[0], lambda: _peers.RayPolicy(seed, brackets=1)),
        ("rank <= 1/eta", DRAWS[1], lambda: _peers.SynePolicy(seed, "ASHA")),
    ]
    for rule, draws, library in libraries:
        ours = run_policy(RulePolicy(seed, rule, draws), task, WORKERS)
        theirs = run_policy(library(), task, WORKERS)
        if ours != theirs:
            raise SystemExit(f"{rule} on {draws} does not reproduce its library's run")


@functools.cache
def _task(name: str) -> Task:
    return load_task(name)


def _one(job: tuple[str, str, str, int]) -> dict[str, Any]:
    rule, draws, task_name, seed = job
    task = _task(task_name)
    # every (task, seed) its own stream; the third arm another one of the same generator
    stream = stream_seed(task_name, seed + (OTHER_SEEDS if draws == DRAWS[2] else 0))
    trajectory: Trajectory = run_policy(RulePolicy(stream, rule, draws), task, WORKERS)
    best: dict[str, float | None] = {}
    for fraction in CHECKPOINTS:
        seen = [value for moment, value in trajectory if moment <= fraction * task.budget_seconds]
        best[str(fraction)] = max(seen) if seen else None
    return {
        "rule": rule,
        "draws": draws,
        "task": task_name,
        "seed": seed,
        "stream_seed": stream,
        "best": best,
    }


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Regret against the best any arm found on the task; each rule minus the baseline rule on
    the same draws, tasks and seeds, with a paired bootstrap 95 % interval."""
    best_known: dict[str, float] = {}
    for run in runs:
        final = run["best"]["1.0"]
        if final is not None:
            best_known[run["task"]] = max(best_known.get(run["task"], final), final)

    def regret(run: dict[str, Any], fraction: float) -> float:
        value = run["best"][str(fraction)]
        return best_known[run["task"]] - (value if value is not None else 0.0)

    by_key = {(r["rule"], r["draws"], r["task"], r["seed"]): r for r in runs}
    pairs = sorted({(r["task"], r["seed"]) for r in runs})
    rng = np.random.default_rng(0)
    arms: dict[str, Any] = {}
    present = {(r["rule"], r["draws"]) for r in runs}
    for draws in DRAWS:
        for rule in RULES:
            if (rule, draws) not in present or (BASELINE, draws) not in present:
                continue
            entry: dict[str, Any] = {}
            for fraction in CHECKPOINTS:
                mine = np.array([regret(by_key[(rule, draws, t, s)], fraction) for t, s in pairs])
                base = np.array(
                    [regret(by_key[(BASELINE, draws, t, s)], fraction) for t, s in pairs]
                )
                interval = paired_interval(mine - base, rng)
                entry[str(fraction)] = {
                    "mean_regret": float(mine.mean()),
                    "minus_baseline": interval["mean"],
                    "low": interval["low"],
                    "high": interval["high"],
                }
            arms[f"{rule} | {draws}"] = entry
    return {
        "best_known": best_known,
        "arms": arms,
        "pairs": len(pairs),
        "streams": _streams(runs, regret, rng),
    }


def _streams(
    runs: list[dict[str, Any]], regret: Callable[[dict[str, Any], float], float], rng: Any
) -> dict[str, Any]:
    """Syne Tune's stream of draws minus the harness's (every harness stream pooled), under
    the baseline rule: runs on different draws are not pairs, so an unpaired bootstrap."""
    syne = [r for r in runs if r["rule"] == BASELINE and r["draws"] == DRAWS[1]]
    harness = [r for r in runs if r["rule"] == BASELINE and r["draws"] != DRAWS[1]]
    if not syne or not harness:
        return {}
    result: dict[str, Any] = {}
    for fraction in CHECKPOINTS:
        a = np.array([regret(r, fraction) for r in syne])
        b = np.array([regret(r, fraction) for r in harness])
        means = a[rng.integers(0, len(a), (2000, len(a)))].mean(axis=1) - b[
            rng.integers(0, len(b), (2000, len(b)))
        ].mean(axis=1)
        result[str(fraction)] = {
            "difference": float(a.mean() - b.mean()),
            "low": float(np.percentile(means, 2.5)),
            "high": float(np.percentile(means, 97.5)),
            "harness_runs": len(b),
        }
    return result


def write(runs: list[dict[str, Any]], args: argparse.Namespace, command: str, made: str) -> None:
    """`command`: what made the runs; `made`: when, and how long it took."""
    summary = summarize(runs)
    name = f"tuning_rung_rule_{args.task_set}"
    (RESULTS / f"{name}.json").write_text(
        json.dumps({"command": command, "made": made, "summary": summary, "runs": runs}, indent=1)
        + "\n"
    )
    lines = [
        "# Successive halving's rung rule on LCBench: scaletune's, Ray Tune's, Syne Tune's",
        "",
        f"Command: `{command}` (from the repository root, in `.bench-venv`; {made}).",
        f"Tasks ({args.task_set} set): {', '.join(TASK_SETS[args.task_set][: args.tasks])}; "
        f"{args.seeds} seeds; {summary['pairs']} (task, seed) pairs.",
        "",
        "One bracket (rungs at epochs 2, 6, 18; eta 3), stopping type, 4 trials at a time, the "
        "harness of `tuning_lcbench*.md` (same budget, curves and start-up cost). n: the "
        "values a rung holds with the new one. Checked first: each rule on its own library's "
        "draws reproduces that library's run report for report (scaletune's "
        "HyperbandScheduler, Ray Tune's ASHA, Syne Tune's ASHA). " + streams_sentence(runs),
        "",
        "| rule | draws | regret at 25 % | 50 % | 100 % | minus best n // eta at 25 % "
        "[95 % interval] | at 50 % | at 100 % |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm, entry in summary["arms"].items():
        rule, draws = arm.split(" | ")
        cells = [f"{entry[str(f)]['mean_regret']:.3f}" for f in CHECKPOINTS]
        if rule == BASELINE:
            differences = ["" for _ in CHECKPOINTS]
        else:
            differences = [
                f"{entry[str(f)]['minus_baseline']:+.3f} "
                f"[{entry[str(f)]['low']:+.3f}, {entry[str(f)]['high']:+.3f}]"
                for f in CHECKPOINTS
            ]
        lines.append(f"| {rule} | {draws} | {' | '.join(cells)} | {' | '.join(differences)} |")
    if summary["streams"]:
        cells = [
            f"{f:.0%}: {summary['streams'][str(f)]['difference']:+.3f} "
            f"[{summary['streams'][str(f)]['low']:+.3f}, {summary['streams'][str(f)]['high']:+.3f}]"
            for f in CHECKPOINTS
        ]
        lines += [
            "",
            "Syne Tune's stream minus the harness's streams (pooled), best n // eta, unpaired "
            f"bootstrap 95 % interval: {'; '.join(cells)}.",
        ]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--task-set", choices=sorted(TASK_SETS), default="other")
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--seeds", type=int, default=10)
    parser.add_argument("--processes", type=int, default=2)
    parser.add_argument(
        "--draws",
        action="append",
        choices=DRAWS,
        help="run these streams only; the others' runs are kept from the committed JSON",
    )
    parser.add_argument("--rules", action="append", choices=list(RULES), help="these only")
    parser.add_argument(
        "--summarize", action="store_true", help="only rebuild the tables from the JSON"
    )
    args = parser.parse_args()
    committed = RESULTS / f"tuning_rung_rule_{args.task_set}.json"
    if args.summarize:
        old = json.loads(committed.read_text())
        write(old["runs"], args, old["command"], old.get("made", ""))
        return
    tasks = TASK_SETS[args.task_set][: args.tasks]
    check_reproduces_the_libraries(load_task(tasks[0]), seed=0)
    jobs = [
        (rule, draws, task, seed)
        for task in tasks
        for seed in range(args.seeds)
        for draws in args.draws or DRAWS
        for rule in args.rules or RULES
    ]
    rerun = {(rule, draws) for rule, draws, _, _ in jobs}
    command = "python -m benchmarks.tuning.rung_rule " + shlex.join(sys.argv[1:])
    kept: list[dict[str, Any]] = []
    if (args.draws or args.rules) and committed.exists():
        old = json.loads(committed.read_text())
        kept = [
            run
            for run in old["runs"]
            if (run["rule"], run["draws"]) not in rerun and "stream_seed" in run  # not shared
        ]
        command = f"{old['command']}` then `{command}"  # the runs kept came from it
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
        runs = kept + pool.map(_one, jobs, chunksize=4)
    minutes = (time.perf_counter() - started) / 60
    write(runs, args, command, f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {minutes:.0f} min")
    for arm, entry in summarize(runs)["arms"].items():
        print(arm, " ".join(f"{entry[str(f)]['mean_regret']:.3f}" for f in CHECKPOINTS))


if __name__ == "__main__":
    main()
