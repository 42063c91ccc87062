"""What a running trial has cost so far, for objectives that count cost while trials run: a
fixed-size trial's tasks times its seconds; an elastic trial's at the sizes it ran at."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scaletune.store import AttemptRecord

BillableSoFar = Callable[[float], float]  # the seconds a trial has run -> its billable seconds


def billed_until(attempts: Sequence[AttemptRecord], time: float) -> float:
    """Each attempt's tasks times its time up to `time` (wall clock); one not yet placed
    counts nothing."""
    total = 0.0
    for attempt in attempts:
        end = time if attempt.end_time is None else min(attempt.end_time, time)
        total += attempt.size * max(end - attempt.start_time, 0.0)
    return total


def fixed_size(tasks: int) -> BillableSoFar:
    return lambda elapsed_seconds: elapsed_seconds * tasks


def resized(
    attempts: Callable[[], Sequence[AttemptRecord]], now: Callable[[], float]
) -> BillableSoFar:
    """An elastic trial's: read from its attempts as they stand."""
    return lambda _elapsed_seconds: billed_until(attempts(), now())
