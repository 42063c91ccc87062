"""How LastValueTPE's proposals were made less greedy (issue 16): TPE's candidates per
proposal, and the alternatives tried beside it, on LCBench.

With Optuna's 24 candidates, TPE keeps the best of 24 draws from the good configurations'
density, so nearly every proposal lands on the best values seen; on a few LCBench tasks that
held the search in a poor region (`tuning_lcbench_trailing.md`). Each arm below changes one
thing from that searcher, in scaletune's tuning loop with the default scheduler (one bracket
of asynchronous successive halving) on the harness of `tuning_lcbench_all.md`:

- 8 candidates (what `LastValueSearcher` now draws);
- Optuna's `consider_endpoints` (the outermost kernels reach the range's bounds; deprecated
  in Optuna 4.9, to go in 6);
- half the proposals random instead of a third.

The default task set is the one the choice was made on: the seven tasks where the old
default trailed random proposals by more than a point at the end on seeds 0..9, and four
where it led, on seeds 20..24, which no other committed run used then (the test on seeds
20..29 came after; the held-out one is on seeds 30..39, tuning_lcbench_all_seeds30to39.md).

    PYTHONPATH=. .bench-venv/bin/python -m benchmarks.tuning.candidates

Writes benchmarks/results/tuning_candidates.{json,md}.
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import numpy as np

from benchmarks._report import paired_interval, write
from benchmarks.tuning._lcbench_results import CHECKPOINTS, RANDOM_PROPOSALS, at
from benchmarks.tuning._optuna_lastvalue import OptunaLastValueSearcher
from benchmarks.tuning._problem import ALL_TASKS, COMMITTED
from scaletune.tuning._lastvalue import LastValueSearcher

# The old default trailed random proposals there (tuning_lcbench_trailing.md at aa08e9e,
# chosen on seeds 0..9), and led them on the last four.
TASKS = (
    "126029",
    "167161",
    "167181",
    "167190",
    "168330",
    "168908",
    "189354",
    "168329",
    "168331",
    "189873",
    "167200",
)
BASELINE = "24 candidates (Optuna's default; the default before)"
ARMS: dict[str, dict[str, Any]] = {
    BASELINE: {"candidates": 24},
    "8 candidates (the default)": {"candidates": 8},
    "24 candidates, consider_endpoints": {"candidates": 24, "endpoints": True},
    "24 candidates, half the proposals random": {"candidates": 24, "random_fraction": 0.5},
}


@contextmanager
def _searcher_of(arm: str) -> Iterator[None]:
    """The tuning loop's searcher for this arm; the scheduler stays the spec's."""
    from scaletune.tuning._strategy import Search, make_search

    settings = dict(ARMS[arm])
    endpoints = settings.pop("endpoints", False)

    def patched(spec: Any, **options: Any) -> Any:
        scheduler = make_search(spec, **options).scheduler
        searcher: LastValueSearcher
        if endpoints:  # Optuna's TPE with `consider_endpoints` (deprecated; not offered)
            searcher = OptunaLastValueSearcher.for_spec(
                spec, {"consider_endpoints": True}, **settings
            )
        else:
            searcher = LastValueSearcher(spec.ranges, spec.objective_type, spec.seed, **settings)
        return Search(searcher, scheduler)

    with mock.patch("scaletune.tuning._tuner.make_search", patched):
        yield


def _one(job: tuple[str, str, int]) -> dict[str, Any]:
    from benchmarks.tuning import run

    arm, task, seed = job
    if arm == RANDOM_PROPOSALS:
        return run._one((arm, task, seed, COMMITTED.name))
    with _searcher_of(arm):
        # the default's spec, this searcher
        record = run._one((RANDOM_PROPOSALS, task, seed, COMMITTED.name))
    return {**record, "method": arm}


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Each arm's mean best accuracy, and its regret minus the baseline's with a paired
    bootstrap 95 % interval (regret from the best any arm found on the task)."""
    best: dict[str, float] = {}
    for run in runs:
        best[run["task"]] = max(best.get(run["task"], -np.inf), at(run, 1.0))
    by = {(run["method"], run["task"], run["seed"]): run for run in runs}
    pairs = sorted({(run["task"], run["seed"]) for run in runs})
    rng = np.random.default_rng(0)
    summary: dict[str, Any] = {"pairs": len(pairs), "arms": {}}
    for arm in (*ARMS, RANDOM_PROPOSALS):
        entry: dict[str, Any] = {}
        for fraction in CHECKPOINTS:
            regret = np.array([best[t] - at(by[(arm, t, s)], fraction) for t, s in pairs])
            base = np.array([best[t] - at(by[(BASELINE, t, s)], fraction) for t, s in pairs])
            entry[str(fraction)] = {
                "mean_regret": float(regret.mean()),
                "minus_baseline": None if arm == BASELINE else paired_interval(regret - base, rng),
            }
        summary["arms"][arm] = entry
    return summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", nargs="+", default=list(TASKS), metavar="TASK")
    parser.add_argument("--first-seed", type=int, default=20)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    unknown = [task for task in args.tasks if task not in ALL_TASKS]
    if unknown:
        parser.error(f"--tasks {' '.join(unknown)}: not LCBench tasks")
    if args.seeds < 1 or args.first_seed < 0:
        parser.error(f"--seeds {args.seeds} --first-seed {args.first_seed}: need 1+ and 0+")
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    arms = (*ARMS, RANDOM_PROPOSALS)
    jobs = [(arm, task, seed) for task in args.tasks for seed in seeds for arm in arms]
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
        runs = pool.map(_one, jobs, chunksize=1)
    minutes = (time.perf_counter() - started) / 60
    summary = summarize(runs)
    write(
        "tuning_candidates",
        "LastValueTPE's candidates per proposal, and the alternatives tried beside them",
        {"settings": vars(args), "minutes": minutes, "summary": summary, "runs": runs},
        _table(summary),
        f"""
Tasks {", ".join(args.tasks)}; seeds {seeds.start}..{seeds.stop - 1}: {summary["pairs"]}
(task, seed) pairs, each its own random stream; {minutes:.0f} min on {args.processes}
processes. scaletune's tuning loop and default scheduler for every arm; only the searcher's
settings differ. Regret: the best validation accuracy (%) any arm found on the task minus
this run's best by then; the difference to the first row is paired, with a bootstrap 95 %
interval.
""",
        environment=".bench-venv",
    )


def _table(summary: dict[str, Any]) -> list[list[str]]:
    rows = [
        [
            "proposals",
            "regret at 25 / 50 / 100 %",
            "minus the first row at 25 %",
            "at 50 %",
            "at 100 %",
        ]
    ]
    for arm, entry in summary["arms"].items():
        regrets = " / ".join(f"{entry[str(f)]['mean_regret']:.2f}" for f in CHECKPOINTS)
        differences = []
        for fraction in CHECKPOINTS:
            row = entry[str(fraction)]["minus_baseline"]
            differences.append(
                "" if row is None else f"{row['mean']:+.2f} [{row['low']:+.2f}, {row['high']:+.2f}]"
            )
        name = {RANDOM_PROPOSALS: "random (the same scheduler, no model)"}.get(arm, arm)
        rows.append([name, regrets, *differences])
    return rows


if __name__ == "__main__":
    main()
