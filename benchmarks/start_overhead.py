"""Cold vs warm start of a 3-worker job.

Two measures, each cold (new worker processes: spawn + imports) and warm (a Session's pool):
- launch: from launch() until all 3 workers have run an empty program (the cluster alone);
- job: a whole 3-worker XGBoost job (1 round, bundled data) through the controller, store
  writes, tracker and model publication included.
Runs alternate cold and warm so that machine noise falls on both; medians are compared.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from benchmarks._programs import NoHyperparameters, do_nothing
from benchmarks._report import summary, write
from scaletune.api import Estimator, Session
from scaletune.cluster import LocalBackend
from scaletune.worker import Exited, Failed, Finished, Rendezvous, WorkerTask

WORKERS = 3


def _launch_seconds(backend: LocalBackend, logs: Path) -> float:
    tasks = [
        WorkerTask(
            "bench",
            rank,
            WORKERS,
            do_nothing,
            NoHyperparameters(),
            {},
            logs,
            logs / f"worker-{rank}.log",
            Rendezvous("127.0.0.1", 0),
            0,
        )
        for rank in range(WORKERS)
    ]
    started = time.perf_counter()
    group = backend.launch(tasks)
    finished = 0
    while finished < WORKERS:
        for event in group.poll(1.0):
            if isinstance(event, Failed | Exited):
                raise RuntimeError(f"worker failed during the benchmark: {event}")
            finished += isinstance(event, Finished)
    elapsed = time.perf_counter() - started
    group.release()
    return elapsed


def _job_seconds(session: Session) -> float:
    channel = {"dataset": "breast-cancer"}
    started = time.perf_counter()
    job = Estimator("xgboost", {"num_round": 1}, instance_count=WORKERS, session=session).fit(
        {"train": channel, "validation": channel}
    )
    elapsed = time.perf_counter() - started
    assert job.describe().status.value == "Completed"
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {
        k: [] for k in ("launch_cold", "launch_warm", "job_cold", "job_warm")
    }
    with tempfile.TemporaryDirectory() as scratch:
        logs = Path(scratch)
        with (
            LocalBackend() as warm_backend,
            Session(logs / "store.db", backend=warm_backend) as warm_session,
        ):
            _launch_seconds(warm_backend, logs)  # fill the pool once
            _job_seconds(warm_session)
            for _ in range(args.repeats):
                with LocalBackend(warm_pool=False) as cold_backend:
                    samples["launch_cold"].append(_launch_seconds(cold_backend, logs))
                samples["launch_warm"].append(_launch_seconds(warm_backend, logs))
                with Session(logs / "store.db", backend=LocalBackend(warm_pool=False)) as cold:
                    samples["job_cold"].append(_job_seconds(cold))
                    cold.backend.close()
                samples["job_warm"].append(_job_seconds(warm_session))
    stats = {name: summary(values) for name, values in samples.items()}
    ratio_launch = stats["launch_cold"]["median"] / stats["launch_warm"]["median"]
    ratio_job = stats["job_cold"]["median"] / stats["job_warm"]["median"]

    def ms(name: str) -> str:
        s = stats[name]
        return f"{s['median'] * 1000:.1f} ({s['min'] * 1000:.1f}–{s['max'] * 1000:.1f})"

    write(
        "start_overhead",
        "Cold vs warm start of a 3-worker job",
        {
            "samples_seconds": samples,
            "stats_seconds": stats,
            "cold_over_warm": {"launch": ratio_launch, "job": ratio_job},
        },
        [
            ["measure", "cold, ms: median (min–max)", "warm, ms: median (min–max)", "cold ÷ warm"],
            [
                "launch 3 workers, empty program",
                ms("launch_cold"),
                ms("launch_warm"),
                f"{ratio_launch:.0f}×",
            ],
            [
                "whole 3-worker XGBoost job (1 round)",
                ms("job_cold"),
                ms("job_warm"),
                f"{ratio_job:.1f}×",
            ],
        ],
        f"""
Each figure is over {args.repeats} runs, cold and warm alternating. Cold starts spawn 3 Python
processes that import numpy, pandas and xgboost; warm starts hand the job to idle workers of a
`Session`'s pool. The whole-job figure also holds data preparation, the store's writes, the
XGBoost tracker, collective set-up, one boosting round and the model's publication.
""",
    )


if __name__ == "__main__":
    main()
