"""How often a boosting job's ranks agree on stopping: about every AGREE_EVERY_SECONDS of rounds."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np
import pytest
from xgboost import collective

from scaletune.algorithms._collective import AGREE_EVERY_SECONDS, MOST_ROUNDS_APART, Agreement


@dataclass
class _Chief:
    """Rank 0 of a job, its stop asked for from `stop_at` on."""

    world_size: int = 3
    stop_at: int = 10**9
    step: int = 0
    asked: list[int] = field(default_factory=list)
    is_chief: bool = True
    checkpoints: None = None
    judged: frozenset[int] = frozenset()  # WorkerTask.judged_steps

    @property
    def task(self) -> SimpleNamespace:
        return SimpleNamespace(judged_steps=self.judged)

    def stop_requested(self) -> bool:
        self.asked.append(self.step)
        return self.step >= self.stop_at

    def stop_goes_on(self) -> bool:  # asked only of a stop: one that ends the job
        return False


def _run(
    ctx: _Chief, seconds_a_round: float, rounds: int, period: int = 1
) -> tuple[list[int], int | None]:
    """The rounds after which the ranks agreed, and the round they stopped after."""
    now = [0.0]
    agreement = Agreement(ctx, 0, period, clock=lambda: now[0])  # type: ignore[arg-type]
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


def test_rounds_agree_about_every_agree_every_seconds() -> None:
    asked, _ = _run(_Chief(), seconds_a_round=0.01, rounds=100)
    gap = int(AGREE_EVERY_SECONDS / 0.01)
    assert 1 < gap < MOST_ROUNDS_APART
    assert asked[:3] == [1, 1 + gap, 1 + 2 * gap]  # after the first round, then every gap


def test_very_fast_rounds_agree_at_most_rounds_apart_and_slow_ones_every_round() -> None:
    fast, _ = _run(_Chief(), seconds_a_round=0.0001, rounds=100)
    assert fast[:3] == [1, 1 + MOST_ROUNDS_APART, 1 + 2 * MOST_ROUNDS_APART]
    slow, _ = _run(_Chief(), seconds_a_round=0.5, rounds=5)
    assert slow == [1, 2, 3, 4, 5]


def test_a_stop_lands_at_the_next_agreement() -> None:
    asked, stopped = _run(_Chief(stop_at=15), seconds_a_round=0.01, rounds=100)
    assert stopped == min(step for step in asked if step >= 15)
    assert stopped is not None and 15 <= stopped < 15 + MOST_ROUNDS_APART


def test_with_sampled_trees_the_ranks_also_agree_on_every_sampling_period() -> None:
    asked, _ = _run(_Chief(), seconds_a_round=0.02, rounds=30, period=10)
    gap = int(AGREE_EVERY_SECONDS / 0.02)
    assert gap == 2
    assert asked == [1, 3, 5, 7, 9, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30]
    fast, _ = _run(_Chief(), seconds_a_round=0.0001, rounds=30, period=10)
    assert fast == [1, 9, 10, 18, 20, 28, 30]  # 8 apart at most, and each period's round


def test_one_worker_agrees_with_itself_every_round() -> None:
    asked, stopped = _run(_Chief(world_size=1, stop_at=4), seconds_a_round=0.001, rounds=10)
    assert (asked, stopped) == ([1, 2, 3, 4], 4)


def test_the_ranks_also_agree_at_every_step_the_tuner_judges() -> None:
    # Rank 0 waited there for the verdict: a stop decided at rung 9 lands at 9, not some
    # rounds on at the next agreement by the clock.
    asked, stopped = _run(
        _Chief(stop_at=9, judged=frozenset({3, 9})), seconds_a_round=0.0001, rounds=100
    )
    assert (asked, stopped) == ([1, 3, 9], 9)
