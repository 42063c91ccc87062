"""How fast a job notices a broken worker and is training again: a worker killed (SIGKILL)
or stopped (SIGSTOP) mid-job, with the retry starting from a warm pool or from cold.

The reference's 3-worker XGBoost job on bank marketing (150 rounds, a checkpoint every 10
rounds, heartbeat timeout 5 s). When rank 0 has reported round 40, rank 1's process gets the
signal. Detection: from the signal to the end of the failed attempt as recorded. Restart:
from there to the first round the new attempt reports (new rendezvous, workers, the
checkpoint loaded, the matrices built again, one round). Medians over the repeats.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks._report import BANK_MARKETING_FILE, write
from scaletune.algorithms.xgboost import REFERENCE_HYPERPARAMETERS
from scaletune.api import Estimator, Session
from scaletune.cluster import LocalBackend

HEARTBEAT_TIMEOUT = 5.0
KILL_AT_ROUND = 40


def _once(session: Session, channel: dict[str, str], signum: int) -> dict[str, float]:
    job = Estimator(
        "xgboost",
        REFERENCE_HYPERPARAMETERS,
        instance_count=3,
        checkpoint={"every_steps": 10},
        retry={"heartbeat_timeout_seconds": HEARTBEAT_TIMEOUT},
        session=session,
    ).fit({"train": channel, "validation": channel}, wait=False)
    while True:
        steps = job.metrics("validation:auc")["step"]
        if len(steps) and int(steps.max()) >= KILL_AT_ROUND:
            break
        time.sleep(0.01)
    victim = job.worker_pids[1]
    sent = time.time()
    os.kill(victim, signum)
    record = job.wait(timeout=600)
    assert record.status.value == "Completed", record.failure_reason
    first, second = job.attempts()[:2]
    assert first.end_time is not None
    resumed_points = job.metrics("validation:auc")
    later = [t.timestamp() for t in resumed_points["time"] if t.timestamp() > first.end_time]
    return {
        "detection_seconds": first.end_time - sent,
        "restart_seconds": min(later) - first.end_time,
        "rounds_redone": float(second.steps_redone or 0),
        "resumed_from_round": float(second.resumed_from_step or 0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bank", type=Path, default=BANK_MARKETING_FILE)
    args = parser.parse_args()
    channel = {"dataset": "bank-marketing", "dataset_file": str(args.bank)}
    results: dict[str, Any] = {}
    rows = [
        [
            "fault",
            "retry from",
            "noticed after, s",
            "training again after, s",
            "rounds redone",
            "resumed from round",
        ]
    ]
    with tempfile.TemporaryDirectory() as scratch:
        for pool in ("warm pool", "cold"):
            backend = LocalBackend(warm_pool=pool == "warm pool")
            with Session(Path(scratch) / f"{pool}.db", backend=backend) as session:
                for name, signum in (("SIGKILL", signal.SIGKILL), ("SIGSTOP", signal.SIGSTOP)):
                    if pool == "warm pool":
                        backend.prestart(6)  # the three to replace the broken group
                    runs = []
                    for _ in range(args.repeats):
                        runs.append(_once(session, channel, signum))
                        if pool == "warm pool":
                            backend.prestart(6)
                    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
                    results[f"{name}, {pool}"] = {"runs": runs, "medians": medians}
                    rows.append(
                        [
                            f"{name} of 1 of 3 workers",
                            pool,
                            f"{medians['detection_seconds']:.2f}",
                            f"{medians['restart_seconds']:.2f}",
                            f"{medians['rounds_redone']:.0f}",
                            f"{medians['resumed_from_round']:.0f}",
                        ]
                    )
            backend.close()
    write(
        "fault_recovery",
        "Fault recovery: noticing a broken worker and training again",
        results,
        rows,
        f"""
Medians of {args.repeats} runs each. A killed worker is noticed when its socket closes; a
stopped one only through its silence: the heartbeat timeout ({HEARTBEAT_TIMEOUT:g} s here, 30 s
by default) counts from its last heartbeat, up to a second before the signal, so it is
noticed a little before the timeout has passed since the signal. "Training again" includes
the new group's start (from the warm pool: no process start or imports; cold: three new
Python processes importing
numpy, pandas and xgboost on 2 cores), XGBoost's rendezvous, loading the checkpoint, building
the matrices, and the first new round. Rounds redone are those reported after the
checkpoint the retry resumed from (at most 10 with a checkpoint every 10 rounds).
""",
    )


if __name__ == "__main__":
    main()
