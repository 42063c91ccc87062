"""Elastic jobs against fixed-size retries under a preemption trace.

A trace is a bounded, seeded schedule of capacity losses and returns: a machine goes away
(one of the job's slots, and the worker on it, SIGKILLed) and comes back some seconds later.
The same trace is replayed against the same jobs run (a) at a fixed size, retried from their
latest checkpoint once the slot is back, and (b) elastic, going on with the workers left and
growing back when the slot returns; (c) each job uninterrupted gives the quality to match.

Capacity is this machine's local slots (SCALETUNE_LOCAL_SLOTS pointed at a file that the
trace rewrites): workers are processes on its cores, so "a machine lost" takes a slot away
but not CPU; the wall times compare what waiting costs, not what fewer machines cost.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import random
import signal
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._report import BANK_MARKETING_FILE, MNIST_FOLDER, write
from scaletune.algorithms.xgboost import REFERENCE_HYPERPARAMETERS
from scaletune.api import Session
from scaletune.cluster import Group, LocalBackend, SlotsFile
from scaletune.spec import training_spec_from_dict
from scaletune.store import TrainingJobRecord, resizes


@dataclass(frozen=True)
class Trace:
    """Losses at `first_loss` s, then every `loss_every` s (up to `losses`), each slot back
    `return_after` s later; the rank killed at each loss drawn from `seed`."""

    first_loss: float
    loss_every: float
    return_after: float
    losses: int
    seed: int

    def events(self) -> list[tuple[float, str]]:
        events: list[tuple[float, str]] = []
        for number in range(self.losses):
            lost = self.first_loss + number * self.loss_every
            events += [(lost, "loss"), (lost + self.return_after, "return")]
        return sorted(events)


class Replay:
    """Plays a trace against one running job: slots taken and given back, workers killed."""

    def __init__(self, trace: Trace, capacity: SlotsFile, most: int) -> None:
        self.trace, self.capacity, self.most = trace, capacity, most
        self.groups: list[tuple[float, list[int]]] = []  # (when placed, pids)
        self.kills: list[float] = []
        self._began: float | None = None
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._play, daemon=True)

    def started(self, group: Group) -> None:
        self.groups.append((time.monotonic(), group.pids))
        if self._began is None:
            self._began = time.monotonic()
            self._thread.start()

    def _play(self) -> None:
        rng = random.Random(self.trace.seed)
        assert self._began is not None
        for offset, kind in self.trace.events():
            if self._done.wait(max(self._began + offset - time.monotonic(), 0.0)):
                return
            if kind == "return":
                self.capacity.write(self.most)
                continue
            self.capacity.write(self.most - 1)
            pids = self.groups[-1][1]
            victim = pids[rng.randrange(len(pids))]
            try:
                os.kill(victim, signal.SIGKILL)
                self.kills.append(time.monotonic())
            except ProcessLookupError:  # between attempts: the slot alone goes
                pass

    def finish(self) -> None:
        self._done.set()
        if self._thread.is_alive():
            self._thread.join()
        self.capacity.write(self.most)

    def back_after(self) -> list[float]:
        """For each kill, the seconds until a group was placed again."""
        placed = [when for when, _ in self.groups]
        return [
            min((p for p in placed if p > kill), default=float("nan")) - kill for kill in self.kills
        ]


def dnn_job(mnist: Path, epochs: int, size: Any, checkpoint_seconds: float = 5) -> dict[str, Any]:
    channel = {"dataset": "mnist", "dataset_file": str(mnist)}
    return {
        "algorithm": "dnn",
        "instance_count": size,
        "hyperparameters": {
            "hidden_units": 128,
            "batch_size": 64,
            "learning_rate": 0.05,
            "momentum": 0.9,
            "epochs": epochs,
            "lr_scaling": "sqrt",
            "warmup_epochs": 1,
        },
        "channels": {"train": channel, "validation": channel, "test": channel},
        "checkpoint": {"every_seconds": checkpoint_seconds},
        "retry": {"max_attempts": 20},
    }


def xgboost_job(
    bank: Path, rounds: int, size: Any, checkpoint_seconds: float = 5
) -> dict[str, Any]:
    channel = {"dataset": "bank-marketing", "dataset_file": str(bank)}
    return {
        "algorithm": "xgboost",
        "instance_count": size,
        "hyperparameters": {**REFERENCE_HYPERPARAMETERS, "num_round": rounds},
        "channels": {"train": channel, "validation": channel},
        "checkpoint": {"every_seconds": checkpoint_seconds},
        "retry": {"max_attempts": 20},
    }


def _run(
    session: Session, raw: dict[str, Any], replay: Replay | None
) -> tuple[TrainingJobRecord, dict[str, Any]]:
    job = session.controller.prepare(training_spec_from_dict(raw))
    try:
        record = session.controller.run(job, on_started=None if replay is None else replay.started)
    finally:
        if replay is not None:
            replay.finish()
    attempts = session.store.attempts.of(record.id)
    return record, {
        "status": record.status.value,
        "wall_seconds": record.wall_seconds,
        "billable_seconds": record.billable_seconds,
        "final_metrics": record.final_metrics,
        "attempts": len(attempts),
        "sizes": [attempt.size for attempt in attempts if attempt.size],
        "resizes": [change.to_json_dict() for change in resizes(attempts)],
        "kills": 0 if replay is None else len(replay.kills),
        "placed_again_after_seconds": [] if replay is None else replay.back_after(),
        "model_sha256": _model_digest(record),
    }


def _model_digest(record: TrainingJobRecord) -> str | None:
    """The saved model's digest, to say whether two runs made the same one (XGBoost's)."""
    model = Path(record.artifact or "", "xgboost-model.json")
    return hashlib.sha256(model.read_bytes()).hexdigest() if model.is_file() else None


def _same_model(outcome: dict[str, Any], base: dict[str, Any]) -> str:
    if outcome["model_sha256"] is None:
        return "–"
    return "yes" if outcome["model_sha256"] == base["model_sha256"] else "no"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dnn-epochs", type=int, default=10)
    parser.add_argument("--xgboost-rounds", type=int, default=1500)
    parser.add_argument("--first-loss", type=float, default=8.0)
    parser.add_argument("--loss-every", type=float, default=15.0)
    parser.add_argument("--return-after", type=float, default=10.0)
    parser.add_argument("--losses", type=int, default=3)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    parser.add_argument("--mnist", type=Path, default=MNIST_FOLDER)
    parser.add_argument("--bank", type=Path, default=BANK_MARKETING_FILE)
    args = parser.parse_args()
    traces = [
        Trace(args.first_loss, args.loss_every, args.return_after, args.losses, seed)
        for seed in args.seeds
    ]
    jobs: dict[str, tuple[Callable[[Any], dict[str, Any]], int, dict[str, int], list[str]]] = {
        "DNN (MNIST MLP), 4 workers, elastic 2-4": (
            lambda size: dnn_job(args.mnist, args.dnn_epochs, size),
            4,
            {"min": 2, "max": 4},
            ["validation:accuracy", "test:accuracy"],
        ),
        "XGBoost (bank marketing), 3 workers, elastic 1-3": (
            lambda size: xgboost_job(args.bank, args.xgboost_rounds, size),
            3,
            {"min": 1, "max": 3},
            ["validation:auc"],
        ),
    }
    results: dict[str, Any] = {
        "traces": [trace.__dict__ | {"events": trace.events()} for trace in traces],
        "jobs": {},
    }
    rows = [
        [
            "job",
            "run",
            "wall s",
            "billable worker-s",
            "sizes",
            "quality (points vs the uninterrupted run of its kind)",
            "placed again after kill, s",
            "same model",
        ]
    ]
    with tempfile.TemporaryDirectory() as scratch:
        capacity = SlotsFile(Path(scratch) / "slots")
        for name, (make, most, elastic_size, metrics) in jobs.items():
            capacity.write(most)
            backend = LocalBackend(slots=capacity)
            runs: dict[str, dict[str, Any]] = {}
            with Session(Path(scratch) / "store.db", backend=backend) as session:
                backend.prestart(most)
                _record, runs["uninterrupted"] = _run(session, make(most), None)
                # Its data order is the elastic one even at one size: the quality to match.
                _record, runs["elastic, uninterrupted"] = _run(session, make(elastic_size), None)
                for trace in traces:  # the two kinds back to back under each trace
                    for run, size in (("fixed size, retried", most), ("elastic", elastic_size)):
                        replay = Replay(trace, capacity, most)
                        label = f"{run}, trace {trace.seed}"
                        _record, runs[label] = _run(session, make(size), replay)
            backend.close()
            results["jobs"][name] = runs
            for run, outcome in runs.items():
                # Against the uninterrupted run of the same kind (fixed or elastic order).
                kind = "elastic, uninterrupted" if run.startswith("elastic") else "uninterrupted"
                base = runs[kind]
                final, before = outcome["final_metrics"], base["final_metrics"]
                quality = "; ".join(
                    f"{metric} {final.get(metric, float('nan')):.4f} "
                    f"({100 * (final.get(metric, float('nan')) - before[metric]):+.2f})"
                    for metric in metrics
                )
                back = outcome["placed_again_after_seconds"]
                sizes = outcome["sizes"]
                rows.append(
                    [
                        name,
                        f"{run} ({outcome['status']})",
                        f"{outcome['wall_seconds']:.1f}",
                        f"{outcome['billable_seconds']:.0f}",
                        " → ".join(map(str, sizes)) if len(set(sizes)) > 1 else str(sizes[0]),
                        quality,
                        ", ".join(f"{seconds:.1f}" for seconds in back) or "–",
                        _same_model(outcome, base),
                    ]
                )
    write(
        "elastic_preemption",
        "Elastic jobs against fixed-size retries under a preemption trace",
        results,
        rows,
        f"""
Traces (seeds {", ".join(str(seed) for seed in args.seeds)}: which rank is killed): a slot
and the worker on it lost at {args.first_loss:g} s after the job's workers were first placed,
then every {args.loss_every:g} s, {args.losses} losses at most; each slot back
{args.return_after:g} s after it went. The fixed-size job retries from its
latest checkpoint once its size fits again (it waits for the slot); the elastic job goes on
with the workers left at once and grows back, at a checkpoint, when the slot returns.
Checkpoints every 5 s. "Placed again after kill": from the SIGKILL to the next group's
placement. Quality is compared with the uninterrupted run of the same kind: an elastic
job walks one order of the whole channel at any size (the fixed-size one, each rank's shard),
so even uninterrupted its batches differ from the fixed-size job's. Billing is as recorded:
each period's workers times its length (a fixed-size job
bills its size while it waits, as today's billing does for a job waiting for room).
Workers are processes on this machine's cores: a lost slot takes no CPU away, so the
elastic job at 3 workers trains about as fast as at 4 here.
""",
    )


if __name__ == "__main__":
    main()
