"""Kendall's tau-b, the one measure of how well a rung's ranking foretells the final one."""

from __future__ import annotations

import pytest

from scaletune.analysis import kendall_tau


def test_agreement_disagreement_and_a_swap() -> None:
    x = [1.0, 2.0, 3.0, 4.0]
    assert kendall_tau(x, [10.0, 20.0, 30.0, 40.0]) == pytest.approx(1.0)
    assert kendall_tau(x, [-1.0, -2.0, -3.0, -4.0]) == pytest.approx(-1.0)
    assert kendall_tau(x, [1.0, 3.0, 2.0, 4.0]) == pytest.approx(4 / 6)  # one pair of six swapped


def test_ties_count_against_neither_side() -> None:
    # 6 pairs: 1 tied in x, 1 tied in y, 4 concordant; tau-b = 4 / sqrt(5 * 5)
    assert kendall_tau([1.0, 1.0, 2.0, 3.0], [1.0, 2.0, 3.0, 3.0]) == pytest.approx(4 / 5)


def test_too_few_pairs_or_no_spread_tell_nothing() -> None:
    assert kendall_tau([1.0], [2.0]) is None
    assert kendall_tau([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]) is None
