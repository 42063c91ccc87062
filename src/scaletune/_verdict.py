"""Waiting at a judged step (a tuning trial's rung) for the controller's verdict: shared by
the built-in workers (`worker._signals`) and users' scripts (`scaletune.report`). A leaf: it
imports nothing of scaletune, so a script's import stays light."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

# How long a program waits at a judged step for a controller that does not answer (stopped,
# gone) before it goes on as if told to: a wait, never a hang.
VERDICT_WAIT_SECONDS = 60.0


def await_verdict(
    step: int,
    stopped: Callable[[], bool],
    judged: Callable[[], int | None],
    *,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Return once `judged()` reaches `step` or `stopped()`, or VERDICT_WAIT_SECONDS passed.
    A verdict takes milliseconds: polls start at half a millisecond and grow to 20."""
    deadline = clock() + VERDICT_WAIT_SECONDS
    pause = 0.0005
    while clock() < deadline:
        if stopped():
            return
        latest = judged()
        if latest is not None and latest >= step:
            return
        sleep(pause)
        pause = min(2 * pause, 0.02)


def read_step(path: Path) -> int | None:
    """The step a judged file holds; None before it is written."""
    text = read_text(path)
    return int(text) if text else None


def read_text(path: Path) -> str | None:
    """A file the controller writes whole, stripped; None before it is written."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except FileNotFoundError:
        return None
