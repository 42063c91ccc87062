"""Cold and warm start of a 3-worker job.

Two measures, each in four ways (`WAYS`): new workers as fresh interpreters, forked from a
fork server (its start included, or already running), and a Session's warm pool:
- launch: from launch() until all 3 workers have run an empty program (the cluster alone);
- job: a whole 3-worker XGBoost job (1 round, bundled data) through the controller, store
  writes, tracker and model publication included.
The order of the ways turns from run to run so that machine noise falls on all; medians
are compared.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks._programs import NoHyperparameters, do_nothing
from benchmarks._report import summary, write
from benchmarks.overhead._jobs import fit_seconds
from scaletune.api import Estimator, Session
from scaletune.cluster import LocalBackend
from scaletune.cluster._starters import ForkServer, FreshInterpreters, WorkerStarter
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
    estimator = Estimator("xgboost", {"num_round": 1}, instance_count=WORKERS, session=session)
    return fit_seconds(estimator, "breast-cancer")


WAYS = {
    "fresh": "cold: fresh interpreters (before)",
    "server_start": "cold: fork server, its start included (a backend's first job)",
    "forked": "cold: fork server running (no warm pool)",
    "warm": "warm pool",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    samples: dict[str, dict[str, list[float]]] = {
        measure: {way: [] for way in WAYS} for measure in ("launch", "job")
    }
    with tempfile.TemporaryDirectory() as scratch:
        logs = Path(scratch)
        store = logs / "store.db"
        with (
            LocalBackend() as warm_backend,
            Session(store, backend=warm_backend) as warm_session,
            LocalBackend(warm_pool=False, starter=ForkServer()) as forking,
            Session(store, backend=forking) as forking_session,
        ):
            _launch_seconds(warm_backend, logs)  # fill the pool and start the server once
            _job_seconds(warm_session)
            _launch_seconds(forking, logs)
            _job_seconds(forking_session)

            def cold(starter: Callable[[], WorkerStarter]) -> Callable[[str], float]:
                def measure(what: str) -> float:
                    with LocalBackend(warm_pool=False, starter=starter()) as backend:
                        if what == "launch":
                            return _launch_seconds(backend, logs)
                        with Session(store, backend=backend) as session:
                            return _job_seconds(session)

                return measure

            ways: dict[str, Callable[[str], float]] = {
                "fresh": cold(FreshInterpreters),
                "server_start": cold(ForkServer),
                "forked": lambda what: (
                    _launch_seconds(forking, logs)
                    if what == "launch"
                    else _job_seconds(forking_session)
                ),
                "warm": lambda what: (
                    _launch_seconds(warm_backend, logs)
                    if what == "launch"
                    else _job_seconds(warm_session)
                ),
            }
            order = list(WAYS)
            for repeat in range(args.repeats):
                for way in order[repeat % 4 :] + order[: repeat % 4]:  # the order turns
                    for measure in ("launch", "job"):
                        samples[measure][way].append(ways[way](measure))
    stats = {
        measure: {way: summary(values) for way, values in by_way.items()}
        for measure, by_way in samples.items()
    }

    def ms(measure: str, way: str) -> str:
        s = stats[measure][way]
        return f"{s['median'] * 1000:.1f} ({s['min'] * 1000:.1f}–{s['max'] * 1000:.1f})"

    titles = {
        "launch": "launch 3 workers, empty program",
        "job": "whole 3-worker XGBoost job (1 round)",
    }
    table = [["measure", *(f"{title}, ms: median (min–max)" for title in WAYS.values())]]
    table += [[titles[m], *(ms(m, way) for way in WAYS)] for m in ("launch", "job")]
    before_over_forked = {
        m: stats[m]["fresh"]["median"] / stats[m]["forked"]["median"] for m in ("launch", "job")
    }
    goal_met = stats["job"]["forked"]["median"] <= 1.0
    write(
        "start_overhead",
        "Cold and warm start of a 3-worker job: fresh interpreters, a fork server, a warm pool",
        {
            "samples_seconds": samples,
            "stats_seconds": stats,
            "fresh_over_forked": before_over_forked,
            "goal_cold_job_seconds": 1.0,
            "goal_met": goal_met,
        },
        table,
        f"""
Each figure is over {args.repeats} runs, the four ways in an order that turns from one run to
the next. Fresh interpreters: 3 Python processes start and import numpy, pandas, xgboost and
scaletune's algorithms each (the local backend's start before the fork server). Fork server:
one process has done those imports and forks each worker; its own start (one import, once a
backend) is in the second column, not in the third. Warm pool: the job is handed to idle
workers. The whole-job figure also holds data preparation, the store's writes, the XGBoost
tracker, collective set-up, one boosting round and the model's publication.

Fresh interpreters over the running fork server: {before_over_forked["launch"]:.0f}× to launch,
{before_over_forked["job"]:.1f}× for the whole job. Goal (issue 39): a cold 3-worker 1-round job
≤ 1 s: {"met" if goal_met else "not met"} with the fork server running
({stats["job"]["forked"]["median"]:.2f} s).
""",
    )


if __name__ == "__main__":
    main()
