"""How often XGBoost's ranks agree on stopping: about every AGREE_EVERY_SECONDS of rounds."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pytest
from xgboost import collective

from scaletune.algorithms.xgboost._program import (
    AGREE_EVERY_SECONDS,
    MOST_ROUNDS_APART,
    _Agreement,
)


@dataclass
class _Chief:
    """Rank 0 of a job, its stop asked for from `stop_at` on."""

    world_size: int = 3
    stop_at: int = 10**9
    step: int = 0
    asked: list[int] = field(default_factory=list)
    is_chief: bool = True
    checkpoints: None = None

    def stop_requested(self) -> bool:
        self.asked.append(self.step)
        return self.step >= self.stop_at


def _run(
    ctx: _Chief, seconds_a_round: float, rounds: int, period: int = 1
) -> tuple[list[int], int | None]:
    """The rounds after which the ranks agreed, and the round they stopped after."""
    now = [0.0]
    agreement = _Agreement(ctx, 0, period, clock=lambda: now[0])  # type: ignore[arg-type]
    for step in range(1, rounds + 1):
        now[0] += seconds_a_round
        ctx.step = step
        stop, _ = agreement.after(step)
        if stop:
            return ctx.asked, step
    return ctx.asked, None


@pytest.fixture(autouse=True)
def _one_rank_sums(monkeypatch: pytest.MonkeyPatch) -> None:
    """The all-reduce of one rank (the others add nothing to what rank 0 says)."""
    monkeypatch.setattr(collective, "allreduce", lambda values, op: np.asarray(values))


def test_fast_rounds_agree_about_every_tenth_of_a_second() -> None:
    asked, _ = _run(_Chief(), seconds_a_round=0.01, rounds=100)
    assert asked[:3] == [1, 11, 21]  # after the first round, every 0.1 s / 10 ms = 10
    assert round(AGREE_EVERY_SECONDS / 0.01) == 10


def test_very_fast_rounds_agree_at_most_rounds_apart_and_slow_ones_every_round() -> None:
    fast, _ = _run(_Chief(), seconds_a_round=0.0001, rounds=100)
    assert fast[:3] == [1, 1 + MOST_ROUNDS_APART, 1 + 2 * MOST_ROUNDS_APART]
    slow, _ = _run(_Chief(), seconds_a_round=0.5, rounds=5)
    assert slow == [1, 2, 3, 4, 5]


def test_a_stop_lands_at_the_next_agreement() -> None:
    _, stopped = _run(_Chief(stop_at=15), seconds_a_round=0.01, rounds=100)
    assert stopped == 21  # asked after round 15, agreed after round 21: 0.06 s later


def test_with_sampled_trees_agreements_fall_on_the_sampling_period() -> None:
    asked, _ = _run(_Chief(), seconds_a_round=0.013, rounds=60, period=10)
    assert asked == [1, 10, 20, 30, 40, 50, 60]


def test_one_worker_agrees_with_itself_every_round() -> None:
    asked, stopped = _run(_Chief(world_size=1, stop_at=4), seconds_a_round=0.001, rounds=10)
    assert (asked, stopped) == ([1, 2, 3, 4], 4)
