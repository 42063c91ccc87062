"""The Pareto front, non-dominated ranks and hypervolume on examples worked by hand."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from scaletune.analysis._pareto import (
    Direction,
    dominates,
    hypervolume,
    non_dominated_ranks,
    pareto_front,
)

AUC_AND_COST = [Direction("validation:auc", maximize=True), Direction("billable_seconds", False)]

# Five trials: (AUC, billable worker-seconds).
TRIALS = {
    "a": (0.78, 600.0),  # best AUC, dearest
    "b": (0.77, 200.0),  # on the front: cheaper for a little less
    "c": (0.76, 300.0),  # beaten by b on both
    "d": (0.70, 50.0),  # cheapest: on the front
    "e": (0.77, 200.0),  # b's twin: on the front with it
}


def test_dominance_needs_as_good_on_all_and_better_on_one() -> None:
    assert dominates(TRIALS["b"], TRIALS["c"], AUC_AND_COST)
    assert not dominates(TRIALS["a"], TRIALS["b"], AUC_AND_COST)  # better AUC, dearer
    assert not dominates(TRIALS["b"], TRIALS["e"], AUC_AND_COST)  # equal is not better


def test_the_front_and_the_ranks_below_it() -> None:
    assert pareto_front(TRIALS, AUC_AND_COST) == ["a", "b", "e", "d"]  # best AUC first
    assert non_dominated_ranks(TRIALS, AUC_AND_COST) == {"a": 0, "b": 0, "c": 1, "d": 0, "e": 0}


def test_hypervolume_of_a_two_objective_front() -> None:
    # Reference (AUC 0.5, 1000 s). As areas to minimise: d covers AUC 0.5-0.70 over 50-1000 s,
    # b adds 0.70-0.77 over 200-1000 s, a adds 0.77-0.78 over 600-1000 s.
    expected = 0.20 * 950 + 0.07 * 800 + 0.01 * 400
    front = [TRIALS[key] for key in ("a", "b", "d")]
    assert hypervolume(front, (0.5, 1000.0), AUC_AND_COST) == pytest.approx(expected)
    assert hypervolume([*front, TRIALS["c"]], (0.5, 1000.0), AUC_AND_COST) == pytest.approx(
        expected
    )  # a dominated point adds nothing
    assert hypervolume([(0.4, 2000.0)], (0.5, 1000.0), AUC_AND_COST) == 0.0  # beyond it


def test_hypervolume_in_three_objectives_against_counting_cells() -> None:
    rng = np.random.default_rng(0)
    directions = [Direction(f"x{i}", maximize=False) for i in range(3)]
    points = [tuple(float(v) for v in rng.integers(0, 6, size=3)) for _ in range(7)]
    # A grid of unit cells up to (6, 6, 6): a cell counts if some point is below its corner.
    cells = sum(
        any(all(p[k] <= cell[k] for k in range(3)) for p in points)
        for cell in itertools.product(range(6), repeat=3)
    )
    assert hypervolume(points, (6.0, 6.0, 6.0), directions) == pytest.approx(cells)
