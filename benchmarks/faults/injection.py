"""A Hyperband tuning job under random worker kills, against the same job left alone.

The reference's bank marketing XGBoost job (3 workers) tuned with Hyperband (Random
proposals, seed 0), 150 trials, 2 at a time, a checkpoint every 25 rounds, 5 retries per trial.
During the faulty run a thread sends SIGKILL to one busy worker process, chosen at random,
every `--kill-every` seconds, until the tuning job ends; the run is bounded by the tuning
job's own time limit (`--minutes`). Reported: the kills, the trials retried, attempts,
rounds redone, whether every trial reached its end, and the cost against the quiet run.
"""

from __future__ import annotations

import argparse
import random
import signal
import tempfile
import threading
from pathlib import Path
from typing import Any

import psutil

from benchmarks._report import BANK_MARKETING_FILE, write
from scaletune.analysis import summarize
from scaletune.api import Session
from scaletune.cluster import LocalBackend
from scaletune.spec import tuning_spec_from_dict
from scaletune.store import JobStatus
from scaletune.tuning import TuningController


def _spec(bank: Path, max_jobs: int, minutes: float) -> Any:
    channel = {"dataset": "bank-marketing", "dataset_file": str(bank)}
    return tuning_spec_from_dict(
        {
            "objective_metric": "validation:auc",
            "objective_type": "Maximize",
            "strategy": "Hyperband",
            "hyperband": {"min_resource": 10, "max_resource": 300, "eta": 3},
            "max_jobs": max_jobs,
            "max_parallel_jobs": 2,
            "seed": 0,
            "max_runtime_seconds": minutes * 60,
            "ranges": {
                "eta": {"type": "Continuous", "min_value": 0.05, "max_value": 0.5},
                "max_depth": {"type": "Integer", "min_value": 2, "max_value": 8},
                "num_round": {"type": "Integer", "min_value": 100, "max_value": 300},
            },
            "training": {
                "algorithm": "xgboost",
                "instance_count": 3,
                "hyperparameters": {"eval_metric": "auc", "tree_method": "hist"},
                "channels": {"train": channel, "validation": channel},
                "checkpoint": {"every_steps": 25},
                "retry": {"max_attempts": 5},
            },
        }
    )


class _Killer:
    """SIGKILL to one busy worker (a child running a task, not an idle one) now and then."""

    def __init__(self, backend: LocalBackend, every: float, seed: int) -> None:
        self._backend, self._every = backend, every
        self._random = random.Random(seed)
        self._done = threading.Event()
        self.kills = 0
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> _Killer:
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._done.set()
        self._thread.join()

    def _loop(self) -> None:
        while not self._done.wait(self._every):
            idle = set(self._backend.idle_pids)
            busy = [
                child
                for child in psutil.Process().children()
                if child.pid not in idle and "scaletune.cluster._entry" in " ".join(_cmd(child))
            ]
            if busy:
                victim = self._random.choice(busy)
                try:
                    victim.send_signal(signal.SIGKILL)
                    self.kills += 1
                except psutil.NoSuchProcess:
                    pass


def _cmd(process: psutil.Process) -> list[str]:
    try:
        return list(map(str, process.cmdline()))
    except psutil.Error:
        return []


def _tune(folder: Path, spec: Any, kill_every: float | None) -> dict[str, Any]:
    backend = LocalBackend(max_idle_workers=6)
    with Session(folder / "store.db", backend=backend) as session:
        tuner = TuningController(session.controller)
        tuning_id = tuner.create(spec)
        kills = 0
        if kill_every is None:
            tuner.run(tuning_id, spec)
        else:
            with _Killer(backend, kill_every, seed=1) as killer:
                tuner.run(tuning_id, spec)
            kills = killer.kills
        summary = summarize(session.store, tuning_id)
        trials = session.store.trials.rows(tuning_id)
        attempts = {t.id: session.store.attempts.of(t.id) for t in trials}
    backend.close()
    statuses = [t.status.value for t in trials]
    return {
        "status": summary.record.status.value,
        "wall_seconds": summary.record.wall_seconds,
        "billable_seconds": sum(t.billable_seconds or 0 for t in trials),
        "best_objective": summary.record.best_objective,
        "trials": len(trials),
        "trial_statuses": {s: statuses.count(s) for s in sorted(set(statuses))},
        "kills": kills,
        "trials_retried": sum(1 for a in attempts.values() if len(a) > 1),
        "attempts": sum(len(a) for a in attempts.values()),
        "rounds_redone": sum(x.steps_redone or 0 for a in attempts.values() for x in a),
        "resumed_from_a_checkpoint": sum(
            1 for a in attempts.values() for x in a[1:] if x.resumed_from_step
        ),
        "failed_trials": statuses.count(JobStatus.FAILED.value),
        "failure_reasons": [t.failure_reason for t in trials if t.status is JobStatus.FAILED],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-jobs", type=int, default=150)
    parser.add_argument("--kill-every", type=float, default=10.0)
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--bank", type=Path, default=BANK_MARKETING_FILE)
    args = parser.parse_args()
    spec = _spec(args.bank, args.max_jobs, args.minutes)
    with tempfile.TemporaryDirectory() as scratch:
        quiet = _tune(Path(scratch) / "quiet", spec, None)
        faulty = _tune(Path(scratch) / "faulty", spec, args.kill_every)
    rows = [
        [
            "run",
            "status",
            "trials (by status)",
            "kills",
            "trials retried",
            "attempts",
            "rounds redone",
            "wall s",
            "billable worker-s",
            "best AUC",
        ]
    ]
    for name, run in (("left alone", quiet), (f"a kill every {args.kill_every:g} s", faulty)):
        by_status = ", ".join(f"{n} {s}" for s, n in run["trial_statuses"].items())
        rows.append(
            [
                name,
                run["status"],
                f"{run['trials']} ({by_status})",
                str(run["kills"]),
                str(run["trials_retried"]),
                str(run["attempts"]),
                str(run["rounds_redone"]),
                f"{run['wall_seconds']:.1f}",
                f"{run['billable_seconds']:.1f}",
                f"{run['best_objective']:.4f}",
            ]
        )
    overhead = {
        "wall_ratio": faulty["wall_seconds"] / quiet["wall_seconds"],
        "billable_ratio": faulty["billable_seconds"] / quiet["billable_seconds"],
    }
    write(
        "fault_injection",
        "A tuning job under random worker kills",
        {"quiet": quiet, "faulty": faulty, "overhead": overhead},
        rows,
        f"""
Under the kills, {faulty["failed_trials"]} trials failed (a trial fails only when it is
killed on all of its 6 attempts); the others reached their end. Of the
{faulty["attempts"] - faulty["trials"]} retries, {faulty["resumed_from_a_checkpoint"]} resumed
from a checkpoint; the others had been killed before their first one (round 25) and started
again from round 0. Under the kills the tuning job took
{overhead["wall_ratio"]:.2f}× the wall time and {overhead["billable_ratio"]:.2f}× the
billable worker-seconds of the quiet run. The two runs propose the same configurations (same
seed), but Hyperband's verdicts depend on the order reports arrive in, which the kills
change, so their trials need not stop at the same rungs: compare the costs with that in mind.
""",
    )


if __name__ == "__main__":
    main()
