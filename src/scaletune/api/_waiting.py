"""Waiting for a job that runs in a thread of this process."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from scaletune.api._notebook import LiveDisplay, in_notebook

WAKE_SECONDS = 0.25  # how often a wait that shows progress wakes to redraw it


def join_or_stop(
    thread: threading.Thread,
    timeout: float | None,
    stop: Callable[[], None],
    what: str,
    while_waiting: Callable[[], None] | None = None,
) -> None:
    """Wait for `thread`, calling `while_waiting` every WAKE_SECONDS (a live display);
    Ctrl-C while waiting stops the job, waits for it, and goes on up."""
    deadline = None if timeout is None else time.monotonic() + timeout
    try:
        while thread.is_alive():
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                break
            if while_waiting is None:
                thread.join(left)
                continue
            thread.join(WAKE_SECONDS if left is None else min(WAKE_SECONDS, left))
            while_waiting()
    except KeyboardInterrupt:
        stop()
        thread.join()
        raise
    if thread.is_alive():
        raise TimeoutError(f"{what} still running after {timeout} s")


def wait_showing(
    thread: threading.Thread,
    timeout: float | None,
    stop: Callable[[], None],
    what: str,
    html: Callable[[], str],
) -> None:
    """`join_or_stop`; in a notebook, one display of `html` kept up to date meanwhile and
    left showing how the job ended."""
    live = LiveDisplay(html) if in_notebook() else None
    join_or_stop(thread, timeout, stop, what, None if live is None else live.refresh)
    if live is not None:
        live.refresh(force=True)
