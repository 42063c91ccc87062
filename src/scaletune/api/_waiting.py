"""Waiting for a job that runs in a thread of this process."""

from __future__ import annotations

import threading
from collections.abc import Callable


def join_or_stop(
    thread: threading.Thread, timeout: float | None, stop: Callable[[], None], what: str
) -> None:
    """Wait for `thread`; Ctrl-C while waiting stops the job, waits for it, and goes on up."""
    try:
        thread.join(timeout)
    except KeyboardInterrupt:
        stop()
        thread.join()
        raise
    if thread.is_alive():
        raise TimeoutError(f"{what} still running after {timeout} s")
