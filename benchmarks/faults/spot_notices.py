"""Preemption notices under a spot trace: notice-aware elastic jobs against today's elastic
jobs and fixed-size retries, which learn of a loss only when the machine goes.

The trace: two of a job's four machines get a preemption notice at different times, one of
30 s and one of 120 s; each machine goes at its notice's deadline and its slot comes back
later. At a notice the slot is no longer offered (a machine on its way out takes no new
work); at the deadline the worker still on it is SIGKILLed. The notice-aware run is told:
SIGTERM to that worker at the notice, as a spot VM's shutdown or a pod's eviction sends it.
The other two are not, so they learn of each loss at its deadline: today's elastic job goes
on with the workers left from its latest checkpoint; the fixed-size job waits for the slot,
then retries at its size. Each job also runs uninterrupted, for the quality to match.

Capacity is this machine's local slots (SCALETUNE_LOCAL_SLOTS pointed at a file the trace
rewrites): workers are processes on its cores, so a lost slot takes no CPU away.
"""

from __future__ import annotations

import argparse
import functools
import os
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._report import BANK_MARKETING_FILE, MNIST_FOLDER, write
from benchmarks.faults.elastic_preemption import dnn_job, xgboost_job
from scaletune.api import Session
from scaletune.checkpoints import CheckpointFolder
from scaletune.cluster import Group, LocalBackend, SlotsFile
from scaletune.spec import training_spec_from_dict
from scaletune.store import TrainingJobRecord

SPOT_PRICE = 0.3  # of the on-demand price of a worker-second
CHECKPOINT_SECONDS = 10


@dataclass(frozen=True)
class Notice:
    """The worker of `rank` (as placed when the notice comes) is told at `at` s that its
    machine goes `seconds` later; its slot is back `back_after` s after it went."""

    at: float
    seconds: float
    rank: int
    back_after: float


class SpotTrace:
    """Plays the notices against one running job: slots taken and given back, the notice
    (SIGTERM) to a worker if the run is told, and the worker still on a machine killed."""

    def __init__(
        self,
        notices: list[Notice],
        capacity: SlotsFile,
        most: int,
        checkpoints: CheckpointFolder,
        *,
        told: bool,
    ) -> None:
        self.notices, self.capacity, self.most, self.told = notices, capacity, most, told
        self.checkpoints = checkpoints
        self.groups: list[list[int]] = []  # each attempt's worker pids, as placed
        self.killed = 0  # workers still on a machine when it went
        # Work thrown away: at each machine's end with a worker on it, the time since the
        # job's newest checkpoint was saved, times the workers of its attempt.
        self.lost_worker_seconds = 0.0
        self._began: float | None = None
        self._lock = threading.Lock()
        self._slots = most
        self._done = threading.Event()
        self._threads = [threading.Thread(target=self._play, args=(n,)) for n in notices]

    def started(self, group: Group) -> None:
        self.groups.append(group.pids)
        if self._began is None:
            self._began = time.monotonic()
            for thread in self._threads:
                thread.start()

    def _take(self, change: int) -> None:
        with self._lock:
            self._slots += change
            self.capacity.write(self._slots)

    def _wait_until(self, offset: float) -> bool:
        assert self._began is not None
        return not self._done.wait(max(self._began + offset - time.monotonic(), 0.0))

    def _play(self, notice: Notice) -> None:
        if not self._wait_until(notice.at):
            return
        self._take(-1)  # on its way out: no new work placed there
        pid = self.groups[-1][notice.rank]
        if self.told:
            _signal(pid, signal.SIGTERM)
        if not self._wait_until(notice.at + notice.seconds):
            return
        if _signal(pid, signal.SIGKILL):  # the machine goes, with whatever still runs there
            self.killed += 1
            newest = self.checkpoints.latest()
            saved = None if newest is None else newest.saved_at
            assert self._began is not None
            since = time.time() - saved if saved is not None else time.monotonic() - self._began
            self.lost_worker_seconds += since * len(self.groups[-1])
        if self._wait_until(notice.at + notice.seconds + notice.back_after):
            self._take(+1)

    def finish(self) -> None:
        self._done.set()
        for thread in self._threads:
            if thread.is_alive():
                thread.join()
        self.capacity.write(self.most)


def _signal(pid: int, sig: int) -> bool:
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return False
    return True


Played = Callable[[CheckpointFolder], SpotTrace]  # a trace, once given the job's checkpoints


def run_under(
    session: Session, raw: dict[str, Any], trace: Played | None
) -> tuple[TrainingJobRecord, SpotTrace | None]:
    """The job run to its end, under the trace if any (played from its first placement)."""
    job = session.controller.prepare(training_spec_from_dict(raw))
    assert job.checkpoints is not None
    played = None if trace is None else trace(job.checkpoints)
    try:
        record = session.controller.run(job, on_started=None if played is None else played.started)
    finally:
        if played is not None:
            played.finish()
    return record, played


def _run(session: Session, raw: dict[str, Any], trace: Played | None) -> dict[str, Any]:
    record, played = run_under(session, raw, trace)
    attempts = session.store.attempts.of(record.id)
    billable = record.billable_seconds or 0.0
    return {
        "status": record.status.value,
        "wall_seconds": record.wall_seconds,
        "billable_seconds": billable,
        "final_metrics": record.final_metrics,
        "attempts": [attempt.to_json_dict() for attempt in attempts],
        "sizes": [attempt.size for attempt in attempts if attempt.size],
        "steps_redone": sum(attempt.steps_redone or 0 for attempt in attempts),
        "lost_worker_seconds": 0.0 if played is None else played.lost_worker_seconds,
        "killed": 0 if played is None else played.killed,
        "failed_attempts": sum(attempt.status.value == "Failed" for attempt in attempts),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    # Jobs of over 200 s uninterrupted on 2 cores: the 120-s notice's machine goes (at 170 s)
    # and its slot comes back while they run.
    parser.add_argument("--dnn-epochs", type=int, default=100)
    parser.add_argument("--xgboost-rounds", type=int, default=25000)
    parser.add_argument("--notices", type=float, nargs=2, default=[30.0, 120.0])
    parser.add_argument("--first-notice", type=float, default=15.0)
    parser.add_argument("--second-notice", type=float, default=50.0)
    parser.add_argument("--back-after", type=float, default=20.0)
    parser.add_argument("--mnist", type=Path, default=MNIST_FOLDER)
    parser.add_argument("--bank", type=Path, default=BANK_MARKETING_FILE)
    args = parser.parse_args()
    notices = [
        Notice(args.first_notice, args.notices[0], 3, args.back_after),
        Notice(args.second_notice, args.notices[1], 1, args.back_after),
    ]
    jobs: dict[str, tuple[Callable[[Any], dict[str, Any]], list[str]]] = {
        "DNN (MNIST MLP)": (
            lambda size: dnn_job(args.mnist, args.dnn_epochs, size, CHECKPOINT_SECONDS),
            [
                "validation:accuracy",
                "test:accuracy",
            ],
        ),
        "XGBoost (bank marketing)": (
            lambda size: xgboost_job(args.bank, args.xgboost_rounds, size, CHECKPOINT_SECONDS),
            ["validation:auc"],
        ),
    }
    most, elastic = 4, {"min": 2, "max": 4}
    runs_of = {  # run -> (size, told of notices, uninterrupted run to compare with)
        "notice-aware elastic": (elastic, True, "elastic, uninterrupted"),
        "today's elastic": (elastic, False, "elastic, uninterrupted"),
        "fixed size, retried": (most, False, "uninterrupted"),
    }
    results: dict[str, Any] = {
        "notices": [notice.__dict__ for notice in notices],
        "spot_price": SPOT_PRICE,
        "jobs": {},
    }
    rows = [
        [
            "job",
            "run",
            "steps redone",
            "lost worker-s",
            "wall s",
            "billable worker-s",
            f"cost at spot {SPOT_PRICE:g}× (on-demand uninterrupted = 1)",
            "sizes",
            "quality vs uninterrupted (points)",
        ]
    ]
    with tempfile.TemporaryDirectory() as scratch:
        capacity = SlotsFile(Path(scratch) / "slots")
        for name, (make, metrics) in jobs.items():
            capacity.write(most)
            backend = LocalBackend(slots=capacity)
            runs: dict[str, dict[str, Any]] = {}
            with Session(Path(scratch) / "store.db", backend=backend) as session:
                backend.prestart(most)
                runs["uninterrupted"] = _run(session, make(most), None)
                runs["elastic, uninterrupted"] = _run(session, make(elastic), None)
                for run, (size, told, _) in runs_of.items():
                    trace = functools.partial(SpotTrace, notices, capacity, most, told=told)
                    runs[run] = _run(session, make(size), trace)
            backend.close()
            results["jobs"][name] = runs
            on_demand = runs["uninterrupted"]["billable_seconds"]
            for run, outcome in runs.items():
                base = runs[runs_of[run][2]] if run in runs_of else outcome
                final, before = outcome["final_metrics"], base["final_metrics"]
                quality = "; ".join(
                    f"{metric} {final.get(metric, float('nan')):.4f} "
                    f"({100 * (final.get(metric, float('nan')) - before[metric]):+.2f})"
                    for metric in metrics
                )
                price = 1.0 if run in ("uninterrupted", "elastic, uninterrupted") else SPOT_PRICE
                sizes = outcome["sizes"]
                rows.append(
                    [
                        name,
                        f"{run} ({outcome['status']})",
                        str(outcome["steps_redone"]),
                        f"{outcome['lost_worker_seconds']:.0f}",
                        f"{outcome['wall_seconds']:.1f}",
                        f"{outcome['billable_seconds']:.0f}",
                        f"{price * outcome['billable_seconds'] / on_demand:.2f}",
                        " → ".join(map(str, sizes)) if len(set(sizes)) > 1 else str(sizes[0]),
                        quality,
                    ]
                )
    first, second = notices
    write(
        "spot_notices",
        "Preemption notices under a spot trace",
        results,
        rows,
        f"""
The trace, from the job's first placement: rank {first.rank}'s machine is given a
{first.seconds:g}-s notice at {first.at:g} s, rank {second.rank}'s a {second.seconds:g}-s
notice at {second.at:g} s; each machine goes at its deadline (the worker still on it
SIGKILLed) and its slot comes back {first.back_after:g} s later. From each notice the slot is
not offered for new work. Only the notice-aware run is told (SIGTERM to the worker at the
notice); the others learn of each loss when the machine goes. Four workers; elastic runs
2 to 4; checkpoints every {CHECKPOINT_SECONDS:g} s. "Steps redone": reported steps (epochs,
rounds) that an attempt ran again past the checkpoint it resumed from; "lost worker-s": at
each machine's end with a worker still on it, the time since the job's newest checkpoint,
times the attempt's workers (the work thrown away). Cost: billable worker-seconds at
{SPOT_PRICE:g} of the on-demand price for the runs on spot capacity, over the uninterrupted
run's on on-demand. Quality: against the uninterrupted run of the same kind (an elastic job
walks one order of the whole channel at any size, a fixed-size one each rank's shard).
Workers are processes on this machine's 2 cores: a lost slot takes no CPU away.
""",
    )


if __name__ == "__main__":
    main()
