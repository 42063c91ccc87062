"""A Ray job beside busy programs: its workers at Ray's own niceness (15) against the
controller's priority, which the Ray instance scaletune starts gives them. The same 3-worker
XGBoost job (breast cancer, new actors each time) with 0, 1 and 2 busy processes (a spinning
loop each, at the ordinary priority) on this machine; one Ray instance per niceness, the two
alternating in rotating order over the rounds.

    .venv/bin/python -m benchmarks.overhead.ray_priority [--rounds 3]
"""

from __future__ import annotations

import argparse
import multiprocessing
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks._report import spread, summary, write
from scaletune.api import Session
from scaletune.cluster import RayBackend
from scaletune.spec import training_spec_from_dict

WORKERS = 3
ROUNDS = 10
BUSY = (0, 1, 2)
NICENESS = {"Ray's default (workers at nice 15)": 15, "the controller's priority": 0}


def _spin() -> None:
    while True:
        pass


@contextmanager
def busy_processes(count: int) -> Iterator[None]:
    """`count` processes that use a whole core each while this lasts."""
    spinners = [multiprocessing.Process(target=_spin, daemon=True) for _ in range(count)]
    for spinner in spinners:
        spinner.start()
    try:
        yield
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.join()


def job_seconds(session: Session) -> float:
    spec = training_spec_from_dict(
        {
            "algorithm": "xgboost",
            "instance_count": WORKERS,
            "hyperparameters": {"num_round": ROUNDS, "eval_metric": "logloss"},
            "channels": {"train": {"dataset": "breast-cancer"}},
            "cluster": {"backend": "ray"},
        }
    )
    started = time.perf_counter()
    record = session.controller.run(session.controller.prepare(spec))
    if record.status.value != "Completed":
        raise RuntimeError(f"{record.status.value}: {record.failure_reason}")
    return time.perf_counter() - started


def one_instance(niceness: int, store: Path) -> dict[int, float]:
    """Each busy count's job wall seconds on a Ray instance whose workers take `niceness`."""
    import ray

    ray.init(
        num_cpus=2 * WORKERS,
        include_dashboard=False,
        log_to_driver=False,
        configure_logging=False,
        _system_config={"worker_niceness": niceness},
    )
    try:
        # Joins the instance started above; no warm groups: every job starts its actors.
        with RayBackend(warm_pool=False) as backend, Session(store, backend=backend) as session:
            job_seconds(session)  # imports and Ray's first worker processes, not counted
            seconds = {}
            for busy in BUSY:
                with busy_processes(busy):
                    seconds[busy] = job_seconds(session)
            return seconds
    finally:
        ray.shutdown()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    wall: dict[str, dict[int, list[float]]] = {name: {b: [] for b in BUSY} for name in NICENESS}
    names = list(NICENESS)
    with tempfile.TemporaryDirectory() as scratch:
        for round_ in range(args.rounds):
            for name in names[round_ % 2 :] + names[: round_ % 2]:
                store = Path(scratch) / f"store-{round_}-{NICENESS[name]}"
                for busy, seconds in one_instance(NICENESS[name], store).items():
                    wall[name][busy].append(seconds)
    default, ours = names
    table = [
        [
            "busy processes beside",
            f"job wall s, {default}",
            f"job wall s, {ours}",
            "ratio of medians",
        ]
    ]
    for busy in BUSY:
        slow, fast = summary(wall[default][busy]), summary(wall[ours][busy])
        table.append(
            [
                str(busy),
                spread(slow),
                spread(fast),
                f"{slow['median'] / fast['median']:.1f}×",
            ]
        )
    results: dict[str, Any] = {
        "rounds": args.rounds,
        "workers": WORKERS,
        "rounds_per_job": ROUNDS,
        "wall_seconds": {
            name: {str(busy): summary(samples) for busy, samples in by_busy.items()}
            for name, by_busy in wall.items()
        },
    }
    write(
        "overhead_ray_priority",
        "A Ray job beside busy programs: workers at Ray's nice 15 against the controller's "
        "priority",
        results,
        table,
        f"""
A {WORKERS}-worker XGBoost job ({ROUNDS} rounds on breast cancer, a third of the rows each),
new actors for each job (no warm group), on a local Ray instance of {2 * WORKERS} logical
CPUs on this machine's 2 cores; beside it 0, 1 or 2 processes that each spin a core at the
ordinary priority (a test suite's other worker, a second job, any busy program). Ray nices
its worker processes by 15; the Ray instance scaletune starts sets `worker_niceness = 0`,
so its workers run at the controller's priority, as the local backend's do. {args.rounds}
rounds, a Ray instance per niceness per round, in rotating order; one job first on each
instance, not counted. Median (min–max) seconds.
""",
    )


if __name__ == "__main__":
    main()
