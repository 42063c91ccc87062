"""Meeting points for a worker group: a free loopback port, and XGBoost's tracker."""

from __future__ import annotations

import contextlib
import logging
import random
import socket
import threading
import time
from pathlib import Path
from typing import Any

from scaletune.worker import Rendezvous

LOOPBACK = "127.0.0.1"
# XGBoost 3.2's tracker can miss a stop that arrives as its accept loop (re)starts and then
# wait forever: freed before its loop is ready, the stop is a no-op; freed between arming its
# poll and polling, it polls a closed descriptor that another thread's new socket may reuse.
# So a tracker is freed once its loop has had time to start (not by worker_args(), which waits
# forever on a loop that has ended), and never waited on past FREE_WAIT_SECONDS.
SETTLE_SECONDS = 0.2
FREE_WAIT_SECONDS = 5.0

log = logging.getLogger(__name__)


# Ports below this are services' and Ray's (its workers take 10002-19999 by default).
LOWEST_PORT = 20_000
EPHEMERAL_RANGE = Path("/proc/sys/net/ipv4/ip_local_port_range")
PICKS = 50


def free_port(host: str = LOOPBACK, rng: random.Random | None = None) -> int:
    """A port free on `host`, and on every other interface too: some programs bind all of
    them (LightGBM's network binds 0.0.0.0), and a port another process holds on another
    address would fail them.

    Between this probe and their bind it may still be taken. The kernel hands out the
    ephemeral range to every outgoing connection as its source port, and a suite or a
    cluster makes thousands (Ray, PostgreSQL, HTTP), so a port from there may be taken by
    one within seconds. Where the range is known (Linux), the port is picked at random
    below it instead, where only another explicit bind can take it. A bind that still
    fails is an infrastructure fault, mended by a retry with fresh ports."""
    low = _ephemeral_low()
    if low is not None and low - LOWEST_PORT >= 1_000:
        pick = rng or random.SystemRandom()
        for _ in range(PICKS):
            port = pick.randrange(LOWEST_PORT, low)
            if _bindable(port):
                return port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("0.0.0.0", 0))
        return int(probe.getsockname()[1])


def _ephemeral_low() -> int | None:
    """The first port of the kernel's ephemeral range, where it says."""
    try:
        return int(EPHEMERAL_RANGE.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return False
        return True


def _start_xgboost_tracker(world_size: int, host: str, attempts: int = 5) -> tuple[Any, int]:
    """XGBoost's tracker on a port we pick: it binds in its constructor, so workers may connect
    at once. A port taken between our probe and its bind is retried."""
    from xgboost.tracker import RabitTracker

    for attempt in range(attempts):
        port = free_port(host)
        try:
            # sortby="task" keeps XGBoost's ranks equal to ours (task ids are zero-padded ranks).
            tracker = RabitTracker(n_workers=world_size, host_ip=host, port=port, sortby="task")
        except ValueError:
            if attempt == attempts - 1:
                raise
            continue
        tracker.start()
        return tracker, port
    raise AssertionError("unreachable")


class GroupRendezvous:
    """Owns what the group meets through; close() frees the tracker's port."""

    def __init__(
        self,
        world_size: int,
        *,
        xgboost_tracker: bool,
        worker_addresses: bool = False,
        host: str = LOOPBACK,
        collective_timeout_seconds: float,
    ) -> None:
        self._tracker: Any = None
        self._tracker_started = 0.0
        tracker_args: dict[str, str | int] = {}
        if xgboost_tracker:
            self._tracker, port = _start_xgboost_tracker(world_size, host)
            self._tracker_started = time.monotonic()
            # The same keys tracker.worker_args() gives, which waits ~100 ms for the tracker.
            tracker_args = {"dmlc_tracker_uri": host, "dmlc_tracker_port": port}
        self.info = Rendezvous(
            master_addr=host,
            master_port=free_port(host),
            xgboost_tracker=tracker_args,
            worker_addresses=tuple(f"{host}:{free_port(host)}" for _ in range(world_size))
            if worker_addresses
            else (),
            collective_timeout_seconds=collective_timeout_seconds,
        )

    def close(self, *, completed: bool) -> None:
        tracker, self._tracker = self._tracker, None
        if tracker is None:
            return
        # After a failure the tracker may still wait for workers that are gone: free() ends it.
        with contextlib.suppress(Exception):
            if completed:
                tracker.wait_for(10)
        settled = self._tracker_started + SETTLE_SECONDS - time.monotonic()
        if settled > 0:
            time.sleep(settled)
        freeing = threading.Thread(target=_free, args=(tracker,), name="xgboost-tracker-free")
        freeing.daemon = True  # one that hangs must not hold the process at exit
        freeing.start()
        freeing.join(FREE_WAIT_SECONDS)
        if freeing.is_alive():
            log.warning(
                "scaletune: XGBoost's tracker did not stop within %gs; it ends with this process",
                FREE_WAIT_SECONDS,
            )


def _free(tracker: Any) -> None:
    with contextlib.suppress(Exception):
        tracker.free()
