"""A session's first job: a fork server that imports every algorithm's library when its
backend opens (before) against one that imports the job's own, started as the job is prepared
(now).

Each repeat opens a new local backend and session (no warm pool: the workers are new forks)
and runs one 2-worker job of each kind: a script (the print-only example), the DNN (1 epoch of
digits) and XGBoost (1 round of breast cancer), the two fork servers in an order that turns
from one repeat to the next. Measured: the whole job (prepare and run) in wall seconds, and the
CPU seconds of the processes it started (the fork server and its workers, and a script's
processes), read from this process's children once the backend has closed.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

from benchmarks._report import spread, summary, write
from benchmarks.overhead._jobs import EVERY_LIBRARY
from scaletune.api import Estimator, Session
from scaletune.cluster import LocalBackend
from scaletune.cluster._starters import ForkServer, WorkerProcess
from scaletune.spec import TrainingJobSpec, load_training_spec

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
WORKERS = 2


class _EveryLibraryAtOpen(ForkServer):
    """The fork server as it was: started with its backend, every algorithm's library in it."""

    def __init__(self) -> None:
        super().__init__()
        super().prepare(EVERY_LIBRARY)

    def prepare(self, preload: tuple[str, ...]) -> None:
        pass

    def open(self, preload: tuple[str, ...], timeout: float) -> tuple[WorkerProcess, Connection]:
        return super().open(EVERY_LIBRARY + preload, timeout)


def _specs() -> dict[str, Callable[[], TrainingJobSpec]]:
    def built_in(
        algorithm: str, hyperparameters: dict[str, object], dataset: str
    ) -> Callable[[], TrainingJobSpec]:
        channel = {"dataset": dataset}
        estimator = Estimator(algorithm, hyperparameters, instance_count=WORKERS)
        return lambda: estimator.spec({"train": channel, "validation": channel})

    return {
        "script (print only, 1 epoch)": lambda: load_training_spec(
            EXAMPLES / "script-print.toml",
            [f"instance_count={WORKERS}", "hyperparameters.epochs=1"],
        ),
        "DNN (1 epoch of digits)": built_in("dnn", {"epochs": 1, "hidden_units": 16}, "digits"),
        "XGBoost (1 round)": built_in("xgboost", {"num_round": 1}, "breast-cancer"),
    }


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _first_job(store: Path, spec: TrainingJobSpec, starter: ForkServer) -> tuple[float, float]:
    """Wall seconds of the job, and CPU seconds of the processes it started."""
    cpu = _children_cpu()
    started = time.perf_counter()
    with (
        LocalBackend(warm_pool=False, starter=starter) as backend,
        Session(store, backend=backend) as session,
    ):
        record = session.controller.run(session.controller.prepare(spec))
        elapsed = time.perf_counter() - started
    assert record.status.value == "Completed", record.failure_reason
    return elapsed, _children_cpu() - cpu


WAYS: dict[str, Callable[[], ForkServer]] = {
    "every_library": _EveryLibraryAtOpen,
    "job_library": ForkServer,
}
TITLES = {
    "every_library": "every algorithm's library, from the backend's opening (before)",
    "job_library": "the job's own, from its preparation (now)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    specs = _specs()
    samples: dict[str, dict[str, dict[str, list[float]]]] = {
        kind: {way: {"wall": [], "cpu": []} for way in WAYS} for kind in specs
    }
    with tempfile.TemporaryDirectory() as scratch:
        store = Path(scratch) / "store.db"
        for spec in specs.values():  # each kind's modules in this process before timing
            _first_job(store, spec(), ForkServer())
        order = list(WAYS)
        for repeat in range(args.repeats):
            for kind, spec in specs.items():
                for way in order[repeat % 2 :] + order[: repeat % 2]:
                    wall, cpu = _first_job(store, spec(), WAYS[way]())
                    samples[kind][way]["wall"].append(wall)
                    samples[kind][way]["cpu"].append(cpu)
                    print(kind, way, f"{wall:.2f} s, {cpu:.2f} CPU s", flush=True)
    stats = {
        kind: {way: {k: summary(v) for k, v in by_way.items()} for way, by_way in ways.items()}
        for kind, ways in samples.items()
    }
    table = [["job (2 workers)", "fork server imports", "wall s", "CPU s of its processes"]]
    for kind, ways in stats.items():
        for way, title in TITLES.items():
            table.append([kind, title, spread(ways[way]["wall"]), spread(ways[way]["cpu"])])
    write(
        "first_job",
        "A session's first job: the fork server's imports, every library or the job's own",
        {"samples": samples, "stats": stats},
        table,
        f"""
Medians (min–max) of {args.repeats} repeats; in each, every kind of job runs once with each
fork server, their order turning. Before, the fork server started with its backend and
imported numpy, pandas, xgboost (which imports scikit-learn) and scaletune's algorithms
whatever the job; now it starts when the first job is prepared (while its data loads) and
imports numpy, scaletune's algorithms and the job's program with its library. A script's
workers run it in a process of their own, which imports what the script does either way.
""",
    )


if __name__ == "__main__":
    main()
