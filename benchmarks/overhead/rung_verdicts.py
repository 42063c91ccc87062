"""Trials held at their rungs for the verdict (now) against trials that train on while it is
decided (before): how often a stop landed after its rung, how often a real tuning job's
decisions differed from its replay's, and what the wait costs in wall time.

The job: Hyperband over XGBoost's eta on breast cancer (243 rounds, rungs at 1, 3, 9, 27, 81,
ranking values), one trial at a time so that the replay sees reports in the job's order, one
worker each. A process burns one core beside it (as `make test-stress` does), the load under
which the race shows; `--idle` leaves the machine alone. The arms alternate, the same seed in
each pair.

    python -m benchmarks.overhead.rung_verdicts [--rounds 4] [--trials 12] [--idle]
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from benchmarks._report import ratio_interval, write
from scaletune.api import Session
from scaletune.simulation import ReplaySource, simulate_tuning
from scaletune.spec import TuningJobSpec, tuning_spec_from_dict
from scaletune.store import JobStatus, Store
from scaletune.tuning import TuningController
from scaletune.tuning._runners import JobTrialRunner

ROUNDS = 243
ARMS = ("held at rungs", "not held")
RUNG = " rung "  # in a stopped trial's reason: "bracket 0 rung 9: ..."


def _spec(seed: int, trials: int) -> TuningJobSpec:
    channel = {"dataset": "breast-cancer"}
    return tuning_spec_from_dict(
        {
            "objective_metric": "validation:logloss",
            "objective_type": "Minimize",
            "strategy": "Hyperband",
            "hyperband": {"min_resource": 1, "max_resource": ROUNDS, "rank_by": "value"},
            "max_jobs": trials,
            "max_parallel_jobs": 1,
            "seed": seed,
            "ranges": {"eta": {"type": "Continuous", "min_value": 0.01, "max_value": 1}},
            "training": {
                "algorithm": "xgboost",
                "hyperparameters": {"num_round": ROUNDS, "eval_metric": "logloss"},
                "channels": {"train": channel, "validation": channel},
            },
        }
    )


def _decisions(store: Store, tuning_id: str) -> list[tuple[object, ...]]:
    return [(t.trial_number, t.status, t.failure_reason) for t in store.trials.rows(tuning_id)]


@contextlib.contextmanager
def _not_held() -> Iterator[None]:
    """The runner as it was: it tells its trials no rungs, so none waits for a verdict."""
    original = JobTrialRunner.judge_at
    JobTrialRunner.judge_at = lambda self, steps: None  # type: ignore[method-assign]
    try:
        yield
    finally:
        JobTrialRunner.judge_at = original  # type: ignore[method-assign]


def run_once(session: Session, seed: int, trials: int, held: bool) -> dict[str, Any]:
    spec = _spec(seed, trials)
    tuner = TuningController(session.controller)
    with contextlib.nullcontext() if held else _not_held():
        started = time.perf_counter()
        record = tuner.run(tuner.create(spec), spec)
        wall = time.perf_counter() - started
    store = session.store
    overruns = []  # rounds a stopped trial trained past the rung that stopped it
    for trial in store.trials.rows(record.id):
        reason = trial.failure_reason or ""
        if trial.status is JobStatus.STOPPED and RUNG in reason:
            rung = int(reason.split(RUNG)[1].split(":")[0])
            steps = [p.step for p in store.metrics(trial.id, "validation:logloss")]
            overruns.append(max(steps) - rung)
    replay = ReplaySource.from_store(store, record.id)
    again = simulate_tuning(replay.spec, replay, store)
    ours, replayed = _decisions(store, record.id), _decisions(store, again.id)
    return {
        "seed": seed,
        "arm": ARMS[0] if held else ARMS[1],
        "wall_seconds": wall,
        "stopped": len(overruns),
        "late_stops": sum(1 for rounds in overruns if rounds > 0),
        "overrun_rounds": overruns,
        "unlike_replay": sum(1 for a, b in zip(ours, replayed, strict=True) if a != b),
        "trials": len(ours),
    }


@contextlib.contextmanager
def _one_core_busy(busy: bool) -> Iterator[None]:
    if not busy:
        yield
        return
    hog = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        yield
    finally:
        hog.kill()
        hog.wait()


def _summary(arm_runs: list[dict[str, Any]]) -> dict[str, Any]:
    overruns = [rounds for run in arm_runs for rounds in run["overrun_rounds"]]
    late = [rounds for rounds in overruns if rounds > 0]
    return {
        "trials": sum(run["trials"] for run in arm_runs),
        "stopped": len(overruns),
        "late_stops": len(late),
        "overrun_median": statistics.median(late) if late else 0,
        "overrun_max": max(late, default=0),
        "unlike_replay": sum(run["unlike_replay"] for run in arm_runs),
        "wall_median": statistics.median(run["wall_seconds"] for run in arm_runs),
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=4, help="pairs of runs, seeds 0..")
    parser.add_argument("--trials", type=int, default=12)
    parser.add_argument("--idle", action="store_true", help="no process burning a core beside")
    args = parser.parse_args(argv)
    runs: list[dict[str, Any]] = []
    with (
        tempfile.TemporaryDirectory() as folder,
        Session(Path(folder) / "store.db") as session,
        _one_core_busy(not args.idle),
    ):
        run_once(session, 1000, 2, held=True)  # untimed: the fork server's start and imports
        for seed in range(args.rounds):
            for held in (True, False) if seed % 2 == 0 else (False, True):
                runs.append(run_once(session, seed, args.trials, held))
                print(runs[-1], flush=True)
    table = [
        [
            "arm: trials",
            "stopped at a rung",
            "of them, stopped after it",
            "rounds past the rung (median, max)",
            "trials unlike the replay",
            "tuning wall seconds (median)",
        ]
    ]
    results: dict[str, Any] = {"runs": runs, "arms": {}}
    for arm in ARMS:
        summary = _summary([run for run in runs if run["arm"] == arm])
        results["arms"][arm] = summary
        table.append(
            [
                f"{arm}: {summary['trials']}",
                str(summary["stopped"]),
                str(summary["late_stops"]),
                f"{summary['overrun_median']:g}, {summary['overrun_max']}",
                str(summary["unlike_replay"]),
                f"{summary['wall_median']:.2f}",
            ]
        )
    walls = {arm: [run["wall_seconds"] for run in runs if run["arm"] == arm] for arm in ARMS}
    cost = ratio_interval(walls[ARMS[1]], walls[ARMS[0]])
    results["wall_ratio_held_over_not"] = cost
    load = "nothing else running" if args.idle else "a process burning one of the cores beside"
    write(
        "rung_verdicts",
        "Trials held at their rungs for the verdict, against trials that train on",
        results,
        table,
        f"""
Hyperband over XGBoost's eta on breast cancer ({ROUNDS} rounds; rungs at 1, 3, 9, 27, 81,
ranking values), {args.trials} trials one at a time, one worker each, {args.rounds} seeds, the
arms alternating with the same seed in each pair; {load}. "Stopped after it": the trial's last
report came past the rung whose verdict stopped it. "Unlike the replay": trials whose status
or reason differ from a replay of the job's own reports (`tuning replay`), which has no race;
a trial that outran its verdict to the end is Completed, not Stopped, and counts there, not
among the stopped. Wall time held ÷ not held, within pairs: {cost["ratio"]:.3f}
({cost["low"]:.3f}–{cost["high"]:.3f}, 95 % BCa).
""",
    )


if __name__ == "__main__":
    main()
