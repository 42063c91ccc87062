"""A running trial's cost so far: a fixed-size trial's tasks times its seconds, an elastic
trial's at the sizes its attempts ran at."""

from __future__ import annotations

import pytest

from scaletune.store import AttemptRecord, JobStatus
from scaletune.tuning._running_cost import billed_until, fixed_size, resized


def _attempt(number: int, start: float, end: float | None, size: int) -> AttemptRecord:
    return AttemptRecord(
        number=number,
        start_time=start,
        end_time=end,
        status=JobStatus.IN_PROGRESS if end is None else JobStatus.STOPPED,
        reason=None,
        retried=False,
        resumed_from_step=None,
        steps_redone=None,
        checkpoint_step=None,
        workers=tuple(f"host/pid {rank}" for rank in range(size)),
    )


def test_an_elastic_trial_costs_each_attempts_workers_times_its_time() -> None:
    # 4 workers for 10 s, then 3 for 20 s, then 4 from 130 s on (still running).
    attempts = [_attempt(1, 100, 110, 4), _attempt(2, 110, 130, 3), _attempt(3, 130, None, 4)]
    assert billed_until(attempts, 140) == pytest.approx(4 * 10 + 3 * 20 + 4 * 10)
    assert billed_until(attempts, 120) == pytest.approx(4 * 10 + 3 * 10)  # up to then only
    assert billed_until(attempts, 100) == 0
    # Not yet placed (waiting for room): no workers, nothing billed.
    assert billed_until([_attempt(1, 100, None, 0)], 150) == 0


def test_the_cost_so_far_is_read_from_the_attempts_as_they_stand() -> None:
    attempts = [_attempt(1, 0, None, 2)]
    now = [10.0]
    cost = resized(lambda: attempts, lambda: now[0])
    assert cost(999.0) == pytest.approx(20)  # its elapsed seconds are not what counts
    attempts[0] = _attempt(1, 0, 10, 2)
    attempts.append(_attempt(2, 10, None, 1))
    now[0] = 30.0
    assert cost(999.0) == pytest.approx(2 * 10 + 1 * 20)
    assert fixed_size(3)(10.0) == pytest.approx(30)
