"""Bayesian optimisation on arrays against Optuna's TPE on LCBench (issue 52): the same
proposal rule fitted without a study (`tuning/_bayesian.py`), so that its cost a trial stops
growing with the trials, must find configurations as good as the study it replaced.

strategy = "Bayesian" (every trial to its end, no early stopping) on all 34 LCBench tasks at
the committed harness's settings, once with the array searcher (the default now) and once
with Optuna's TPE as the default had it (multivariate, constant liar), on the same seed:
the best validation accuracy by half and by all of the budget, paired by task and seed.

    .bench-venv/bin/python -m benchmarks.tuning.bayesian_searcher --seeds 5

Writes benchmarks/results/tuning_bayesian_arrays.{json,md}.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import functools
import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

import scaletune.tuning._strategy as strategy
from benchmarks._report import paired_interval, write
from benchmarks.tuning._problem import ALL_TASKS, METRIC, Task, load_task, stream_seed
from benchmarks.tuning._scaletune import tuning_spec
from scaletune.simulation import simulate_tuning
from scaletune.store import Store
from scaletune.tuning._bayesian import ParzenSearcher
from scaletune.tuning._searchers import Config, bayesian_searcher

ARRAYS = "TPE on arrays (the default)"
OPTUNA = "Optuna's TPE (multivariate, constant liar; before)"


def _optuna(ranges: Any, objective: Any, seed: int, first: tuple[Config, ...] = ()) -> Any:
    return bayesian_searcher(ranges, objective, seed, first=first)


@functools.cache
def _task(name: str) -> Task:
    return load_task(name)


def run_one(job: tuple[str, str, int]) -> dict[str, Any]:
    searcher, name, seed = job
    # The searcher strategy = "Bayesian" makes: the one measured, in this worker process.
    setattr(strategy, "ParzenSearcher", ParzenSearcher if searcher == ARRAYS else _optuna)  # noqa: B010
    task = _task(name)
    spec = tuning_spec("Bayesian", task, stream_seed(name, seed))
    with (
        tempfile.TemporaryDirectory(prefix="scaletune-bench-") as folder,
        Store(f"sqlite:///{Path(folder) / 'store.db'}") as store,
    ):
        record = simulate_tuning(spec, task.source, store)
        start = record.start_time or 0.0
        trials = store.training_jobs_of(record.id)
        points = [
            (point.time - start, point.value)
            for trial in trials
            for point in store.metrics(trial.id, METRIC)
        ]
    half = [value for when, value in points if when <= task.budget_seconds / 2]
    return {
        "searcher": searcher,
        "task": name,
        "seed": seed,
        "trials": len(trials),
        "best_half": max(half, default=float("nan")),
        "best": max(value for _, value in points),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    seeds = range(args.seeds)
    jobs = [(s, task, seed) for task in ALL_TASKS for seed in seeds for s in (ARRAYS, OPTUNA)]
    with concurrent.futures.ProcessPoolExecutor(args.processes) as pool:
        runs = list(pool.map(run_one, jobs, chunksize=2))
    by = {(run["searcher"], run["task"], run["seed"]): run for run in runs}
    rng = np.random.default_rng(0)  # the bootstrap's draws
    rows = [["by", "arrays: mean best", "Optuna: mean best", "arrays minus Optuna [95 % interval]"]]
    results: dict[str, Any] = {}
    for key, label in (("best_half", "half the budget"), ("best", "the whole budget")):
        pairs = [
            (by[(ARRAYS, t, s)][key], by[(OPTUNA, t, s)][key]) for t in ALL_TASKS for s in seeds
        ]
        gap = paired_interval(np.array([a - b for a, b in pairs]), rng)
        results[key] = gap
        rows.append(
            [
                label,
                f"{statistics.fmean(a for a, _ in pairs):.3f}",
                f"{statistics.fmean(b for _, b in pairs):.3f}",
                f"{gap['mean']:+.3f} [{gap['low']:+.3f}, {gap['high']:+.3f}]",
            ]
        )
    write(
        "tuning_bayesian_arrays",
        "Bayesian optimisation on arrays against Optuna's TPE on LCBench",
        {"settings": vars(args), "results": results, "runs": runs},
        rows,
        f"""
strategy = "Bayesian" on all 34 LCBench tasks x seeds 0..{args.seeds - 1} (each (task, seed)
pair its own stream), 4 trials at a time, every trial to its end, the harness's budget and
time model. Best validation accuracy (%) reported by half and by all of the budget; the
interval is a paired bootstrap over (task, seed) pairs. The arrays' rule is Optuna's
univariate TPE with the liar's trials in the bad group at each fit; Optuna's was
multivariate. Its cost a trial: tuning_scale.md.
""",
        environment=".bench-venv",
    )


if __name__ == "__main__":
    main()
