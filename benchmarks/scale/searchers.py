"""What a simulated tuning job costs a trial as it grows, with the settings a user writes.

The job: two ranges, curves of 100 steps, 16 trials at a time, on a fresh SQLite store;
nothing pinned but the sizes (`benchmarks/scale/_user_job.py`). A row for the default
(Hyperband, LastValueTPEThenCQR proposals, forecast rungs) and one for each other searcher,
at 1,000 / 10,000 / 100,000 trials, plus LastValueTPE as it was (an Optuna study rebuilt at
each fit), side by side in one run. Each run is its own process, capped in wall time: past
the cap, the rate over the trials finished so far.

    python -m benchmarks.scale.searchers --cap 300                # every row, 1k and 10k
    python -m benchmarks.scale.searchers --sizes 100000 --only default --only Random \
        --only PBT --only "several objectives" --cap 900 --name tuning_scale_100k

Writes benchmarks/results/tuning_scale.{json,md} (or NAME).
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._report import write

VARIANTS = (
    "default",
    "LastValueTPE",
    "before",
    "Random",
    "Bayesian",
    "BOHB",
    "LastValueCQR",
    "LastValueCQR, value rungs",
    "PBT",
    "several objectives",
)
DESCRIPTIONS = {
    "default": "Hyperband, nothing set (LastValueTPEThenCQR, forecast rungs)",
    "LastValueTPE": 'Hyperband, searcher = "LastValueTPE" (the default before)',
    "before": "LastValueTPE as it was: an Optuna study rebuilt at each fit",
    "Random": 'strategy = "Random" (every trial to 100 steps)',
    "Bayesian": 'strategy = "Bayesian" (TPE on arrays; every trial to 100 steps)',
    "BOHB": 'Hyperband, searcher = "BOHB" (a model per rung)',
    "LastValueCQR": 'Hyperband, searcher = "LastValueCQR" (quantile regression, latest values)',
    "LastValueCQR, value rungs": 'the same, rank_by = "value"',
    "PBT": 'strategy = "PBT", perturbation_interval = 10',
    "several objectives": "Hyperband, objectives AUC and billable seconds (random proposals)",
}
# Seconds a trial: the default's (issue 39), the other searchers' (issue 52).
GOALS = {
    ("default", 10_000): 0.005,
    ("default", 100_000): 0.010,
    ("Bayesian", 10_000): 0.005,
    ("BOHB", 10_000): 0.005,
    ("several objectives", 100_000): 0.005,
}
WARM_UP = 50  # trials of a job run first in the same process, not measured


def _child(variant: str, trials: int, url: str) -> None:
    from unittest import mock

    from benchmarks.scale._user_job import UserCurves, user_spec
    from scaletune.simulation import simulate_tuning
    from scaletune.store import Store

    if variant == "before":  # for this process's whole life
        mock.patch("scaletune.tuning._strategy.LastValueSearcher", _before_searcher()).start()
    with Store(url) as store:
        # a small job first, so that what is imported on first use is not counted a trial
        simulate_tuning(user_spec(WARM_UP, variant), UserCurves(), store, start_time=1e9)
        spec = user_spec(trials, variant)
        print(f"started {time.perf_counter()}", flush=True)
        started = time.perf_counter()
        record = simulate_tuning(spec, UserCurves(), store, start_time=2e9)
        seconds = time.perf_counter() - started
        run = len(store.list_training_jobs(tuning_job_id=record.id))
        print(json.dumps({"seconds": seconds, "run": run}), flush=True)


def _before_searcher() -> Any:
    from benchmarks.tuning._optuna_lastvalue import OptunaLastValueSearcher

    def make(ranges: Any, objective: Any, seed: int, *, first: Any = ()) -> Any:
        return OptunaLastValueSearcher(ranges, objective, seed, sampler_options={}, first=first)

    return make


def _finished_trials(database: Path) -> int:
    """Of the measured job (the second tuning job in the store), the trials that ended."""
    with sqlite3.connect(database) as conn:
        (count,) = conn.execute(
            "SELECT count(*) FROM training_jobs WHERE end_time IS NOT NULL AND tuning_job_id = "
            "(SELECT id FROM tuning_jobs ORDER BY created_at DESC LIMIT 1)"
        ).fetchone()
    return int(count)


def run_one(variant: str, trials: int, cap: float) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="scaletune-scale-") as folder:
        database = Path(folder) / "store.db"
        command = [sys.executable, "-m", "benchmarks.scale.searchers", "--child"]
        command += [variant, str(trials), f"sqlite:///{database}"]
        child = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert child.stdout is not None
        began = time.perf_counter()  # replaced by the child's own start, once it says it
        result: dict[str, Any] = {"variant": variant, "trials": trials}
        for line in child.stdout:
            if line.startswith("started"):
                began = time.perf_counter()
                _kill_at(child, began + cap)
            elif line.startswith("{"):
                done = json.loads(line)
                result |= {"seconds": done["seconds"], "finished": done["run"]}
        child.wait()
        if "seconds" not in result:  # stopped at the cap
            result |= {
                "seconds": time.perf_counter() - began,
                "finished": _finished_trials(database),
                "capped": True,
            }
        result["per_trial"] = result["seconds"] / max(result["finished"], 1)
        print(json.dumps(result), flush=True)
        return result


def _kill_at(child: subprocess.Popen[str], deadline: float) -> None:
    """Kill the child at the deadline (a timer thread: the reader blocks on its output)."""
    import threading

    def kill() -> None:
        if child.poll() is None:
            child.kill()

    timer = threading.Timer(max(deadline - time.perf_counter(), 0), kill)
    timer.daemon = True
    timer.start()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="1000,10000")
    parser.add_argument("--only", action="append", choices=VARIANTS)
    parser.add_argument("--cap", type=float, default=600.0, help="seconds a run may take")
    parser.add_argument("--name", default="tuning_scale")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        variant, trials, url = args.child
        _child(variant, int(trials), url)
        return
    sizes = [int(size) for size in args.sizes.split(",")]
    runs = [run_one(v, n, args.cap) for n in sizes for v in args.only or VARIANTS]
    table = [
        [
            "searcher",
            "settings",
            "max_jobs",
            "trials run",
            "seconds a trial",
            "how it grows",
            "goal",
        ]
    ]
    for run in runs:
        smaller = [
            r for r in runs if r["variant"] == run["variant"] and r["trials"] < run["trials"]
        ]
        growth = f"{run['per_trial'] / smaller[-1]['per_trial']:.2f}x" if smaller else ""
        goal = GOALS.get((run["variant"], run["trials"]))
        per_trial = f"{run['per_trial']:.4f}"
        if run.get("capped"):
            per_trial += f" (stopped at the {args.cap:g} s cap: the rate so far)"
        table.append(
            [
                run["variant"],
                DESCRIPTIONS[run["variant"]],
                f"{run['trials']:,}",
                f"{run['finished']:,}",
                per_trial,
                growth,
                ""
                if goal is None
                else f"≤ {goal} ({'met' if run['per_trial'] <= goal else 'not met'})",
            ]
        )
    write(
        args.name,
        "Seconds a simulated tuning job costs a trial, with the settings a user writes",
        {"cap_seconds": args.cap, "runs": runs},
        table,
        "The real tuning loop, searchers, schedulers and store writes on simulated trials "
        "(benchmarks/scale/_user_job.py); wall time from the job's creation to its end, over "
        f"the trials it ran, after a {WARM_UP}-trial job in the same process (imports made on "
        "first use are not a trial's cost). 'how it grows': this size's seconds a trial over "
        "the smaller size's. PBT runs its population through the curves' steps whatever "
        "max_jobs says: its job does not grow with it.",
    )


if __name__ == "__main__":
    main()
