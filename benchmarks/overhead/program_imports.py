"""A job's program imported once by the fork server, or by each worker it forks.

A 3-worker DNN job (1 epoch of digits) on a running fork server without a warm pool, as a
tuning job's later trials and a session's later jobs start: each worker is a new fork. Two
ways, side by side in one run, their order turning from one repeat to the next:
- each worker imports the program (torch and the DNN's modules) itself: the fork server only
  holds the backend's preload (numpy, pandas, xgboost, scaletune's algorithms), as before;
- the fork server imports a job's program before forking its workers, once: later workers
  start with it.
"""

from __future__ import annotations

import argparse
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path

from benchmarks._report import spread, summary, write
from benchmarks.overhead._jobs import EVERY_LIBRARY, fit_seconds
from scaletune.api import Estimator, Session
from scaletune.cluster import LocalBackend
from scaletune.cluster._starters import ForkServer, WorkerProcess

WORKERS = 3


class _BackendPreloadOnly(ForkServer):
    """The fork server as it was: a job's program is left for each worker to import."""

    def prepare(self, preload: tuple[str, ...]) -> None:
        super().prepare(EVERY_LIBRARY)

    def open(self, preload: tuple[str, ...], timeout: float) -> tuple[WorkerProcess, Connection]:
        return super().open(EVERY_LIBRARY, timeout)


def _job_seconds(session: Session) -> float:
    estimator = Estimator(
        "dnn", {"epochs": 1, "hidden_units": 16}, instance_count=WORKERS, session=session
    )
    return fit_seconds(estimator, "digits")


WAYS = {
    "each_worker": "each worker imports the program (before)",
    "fork_server": "the fork server imports it once",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    samples: dict[str, list[float]] = {way: [] for way in WAYS}
    with tempfile.TemporaryDirectory() as scratch:
        store = Path(scratch) / "store.db"
        with (
            LocalBackend(warm_pool=False, starter=_BackendPreloadOnly()) as before,
            LocalBackend(warm_pool=False, starter=ForkServer()) as after,
            Session(store, backend=before) as before_session,
            Session(store, backend=after) as after_session,
        ):
            sessions = {"each_worker": before_session, "fork_server": after_session}
            for session in sessions.values():
                _job_seconds(session)  # each server started, the second with the program
            order = list(WAYS)
            for repeat in range(args.repeats):
                for way in order[repeat % 2 :] + order[: repeat % 2]:
                    samples[way].append(_job_seconds(sessions[way]))
    stats = {way: summary(values) for way, values in samples.items()}
    ratio = stats["each_worker"]["median"] / stats["fork_server"]["median"]
    table = [
        ["way", "whole 3-worker DNN job (1 epoch of digits), s: median (min–max)"],
        *([title, spread(stats[way])] for way, title in WAYS.items()),
    ]
    write(
        "program_imports",
        "A job's program imported once by the fork server, or by each worker",
        {"samples_seconds": samples, "stats_seconds": stats, "before_over_after": ratio},
        table,
        f"""
Each figure is over {args.repeats} jobs, the two ways in an order that turns from one repeat
to the next, each on a fork server started beforehand (no warm pool: every worker is a new
fork). Before, each of the 3 workers imported torch and the DNN's modules after its fork; now
the fork server imports them once, before the first worker it forks for such a job, and every
later worker starts with them. The job's own work (data, 1 epoch, the store, the model) is
in both.

Each worker importing the program over the fork server importing it once: {ratio:.2f}×.
""",
    )


if __name__ == "__main__":
    main()
