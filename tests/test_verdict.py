"""Waiting at a judged step: until the verdict or a stop, and never past its bound."""

from __future__ import annotations

from pathlib import Path

from scaletune._verdict import VERDICT_WAIT_SECONDS, await_verdict, read_step
from tests.conftest import SleepingClock


def test_a_controller_that_never_answers_is_waited_for_up_to_the_bound_then_passed() -> None:
    clock = SleepingClock()
    await_verdict(9, lambda: False, lambda: 3, clock=clock.monotonic, sleep=clock.sleep)
    assert VERDICT_WAIT_SECONDS <= clock.now < VERDICT_WAIT_SECONDS + 0.05
    assert clock.slept[:3] == [0.0005, 0.001, 0.002]  # quick at first, then every 20 ms
    assert max(clock.slept) == 0.02


def test_the_wait_ends_at_the_verdict_or_a_stop() -> None:
    clock = SleepingClock()
    verdicts = iter([None, 3, 9])
    await_verdict(
        9, lambda: False, lambda: next(verdicts), clock=clock.monotonic, sleep=clock.sleep
    )
    assert len(clock.slept) == 2
    stopped = iter([False, True])
    await_verdict(9, lambda: next(stopped), lambda: None, clock=clock.monotonic, sleep=clock.sleep)
    assert len(clock.slept) == 3


def test_a_judged_file_reads_as_its_step_and_none_before_it_is_written(tmp_path: Path) -> None:
    assert read_step(tmp_path / "judged") is None
    (tmp_path / "judged").write_text("27\n")
    assert read_step(tmp_path / "judged") == 27
