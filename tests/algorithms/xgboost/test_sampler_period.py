"""Which rounds a sampled XGBoost job can be resumed at exactly."""

from __future__ import annotations

import pytest

from scaletune.algorithms.xgboost._program import sampler_period


@pytest.mark.parametrize(
    ("every_steps", "period"),
    [(None, 10), (4, 4), (12, 6), (100, 10), (1000, 10), (7, 7), (13, 1), (1, 1)],
)
def test_the_period_divides_every_steps_and_is_at_most_ten(
    every_steps: int | None, period: int
) -> None:
    assert sampler_period(True, every_steps) == period


def test_without_sampling_every_round_resumes_exactly() -> None:
    assert sampler_period(False, None) == 1
    assert sampler_period(False, 12) == 1
