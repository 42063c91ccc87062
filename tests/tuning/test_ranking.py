"""Ranking several objectives at a rung: exact up to SAMPLE points, against a uniform sample
of them past it, and the same decisions either way to within the sample's error."""

from __future__ import annotations

import numpy as np
import pytest

from scaletune.analysis._pareto import Direction
from scaletune.tuning import _ranking
from scaletune.tuning._ranking import ByTradeOff

RUNG = (0, 1)


def _decisions(monkeypatch: pytest.MonkeyPatch, sample: int, trials: int) -> list[bool]:
    monkeypatch.setattr(_ranking, "SAMPLE", sample)
    ranking = ByTradeOff(
        [Direction("auc", maximize=True), Direction("billable_seconds", maximize=False)], seed=3
    )
    rng = np.random.default_rng(0)
    decisions = []
    for trial in range(trials):
        quality, cost = rng.uniform(), rng.uniform()
        ranking.add(RUNG, trial, quality, [cost])
        keep = max(1, (trial + 1) // 3)
        decisions.append(ranking.passes(RUNG, [], trial, quality, keep))
    return decisions


def test_past_the_sample_a_rung_ranks_against_a_sample_of_fixed_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    exact = _decisions(monkeypatch, sample=10_000, trials=3000)
    sampled = _decisions(monkeypatch, sample=256, trials=3000)
    assert exact[:256] == sampled[:256]  # up to the sample's size: every point, exactly
    agree = np.mean(np.array(exact[256:]) == np.array(sampled[256:]))
    assert agree > 0.95  # past it, only trials near their trade-off's cut can differ
    assert abs(np.mean(exact) - np.mean(sampled)) < 0.02  # and about a third go on in both


def test_the_sample_is_uniform_over_every_point_so_far(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_ranking, "SAMPLE", 200)
    ranking = ByTradeOff(
        [Direction("auc", maximize=True), Direction("billable_seconds", maximize=False)], seed=1
    )
    for trial in range(10_000):
        ranking.add(RUNG, trial, float(trial), [0.0])
    points = ranking._points[RUNG]
    sample = points.ranked_against
    assert sample.shape == (200, 2) and points.count == 10_000
    # the maximised objective, minimised: -trial; a uniform sample has its mean near the middle
    assert abs(-sample[:, 0].mean() - 5000) < 600
    low, high = points.bounds
    assert list(low) == [-9999.0, 0.0] and list(high) == [0.0, 0.0]
