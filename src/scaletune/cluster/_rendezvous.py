"""Meeting points for a worker group: a free loopback port, and XGBoost's tracker."""

from __future__ import annotations

import contextlib
import socket
from typing import Any

from scaletune.worker import Rendezvous

LOOPBACK = "127.0.0.1"


def free_port(host: str = LOOPBACK) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return int(probe.getsockname()[1])


class GroupRendezvous:
    """Owns what the group meets through; close() frees the tracker's port."""

    def __init__(self, world_size: int, *, xgboost_tracker: bool, host: str = LOOPBACK) -> None:
        self._tracker: Any = None
        tracker_args: dict[str, str | int] = {}
        if xgboost_tracker:
            from xgboost.tracker import RabitTracker

            # sortby="task" keeps XGBoost's ranks equal to ours (task ids are zero-padded ranks).
            self._tracker = RabitTracker(n_workers=world_size, host_ip=host, sortby="task")
            self._tracker.start()
            tracker_args = dict(self._tracker.worker_args())
        self.info = Rendezvous(master_addr=host, master_port=free_port(host),
                               xgboost_tracker=tracker_args)

    def close(self, *, completed: bool) -> None:
        tracker, self._tracker = self._tracker, None
        if tracker is None:
            return
        # After a failure the tracker may still wait for workers that are gone: free() ends it.
        with contextlib.suppress(Exception):
            if completed:
                tracker.wait_for(10)
        with contextlib.suppress(Exception):
            tracker.free()
