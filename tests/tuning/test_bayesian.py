"""Bayesian optimisation on arrays: seeded, learning, Optuna's order of results, a bounded
cost a proposal, and a restore that proposes as the uninterrupted search would."""

from __future__ import annotations

import numpy as np

from scaletune.spec import ContinuousRange, IntegerRange, ObjectiveType, Range
from scaletune.tuning import TrialResult
from scaletune.tuning._bayesian import ParzenSearcher
from scaletune.tuning._searchers import Suggestion

RANGES: dict[str, Range] = {
    "x": ContinuousRange(min_value=0, max_value=1),
    "depth": IntegerRange(min_value=1, max_value=10),
}


def _x(suggestion: Suggestion) -> float:
    return float(suggestion.config["x"])  # type: ignore[arg-type]


def _searcher(seed: int = 0) -> ParzenSearcher:
    return ParzenSearcher(RANGES, ObjectiveType.MAXIMIZE, seed)


def _run(searcher: ParzenSearcher, trials: int) -> list[Suggestion]:
    made = []
    for _ in range(trials):
        suggestion = searcher.suggest()
        searcher.observe(TrialResult(suggestion.number, _x(suggestion)))
        made.append(suggestion)
    return made


def test_seeded_proposals_repeat_and_learn_where_the_objective_is_high() -> None:
    first = [s.config for s in _run(_searcher(seed=1), 60)]
    assert first == [s.config for s in _run(_searcher(seed=1), 60)]
    assert first != [s.config for s in _run(_searcher(seed=2), 60)]
    assert all(isinstance(c["depth"], int) and 1 <= c["depth"] <= 10 for c in first)
    late = np.mean([float(c["x"]) for c in first[30:]])  # type: ignore[arg-type]
    assert late > 0.75  # random draws would average 0.5


def test_stopped_trials_rank_below_complete_ones_and_failed_ones_are_left_out() -> None:
    searcher = ParzenSearcher(RANGES, ObjectiveType.MAXIMIZE, 0, n_startup=2)
    failed = 0
    for _ in range(60):  # complete results are best below x = 0.3
        suggestion = searcher.suggest()
        x = _x(suggestion)
        if 0.3 <= x < 0.6:  # a partial value above any complete one: still ranked below them
            result = TrialResult(suggestion.number, 2.0, resource=1, stopped_early=True)
        elif suggestion.number % 7 == 0:
            result, failed = TrialResult(suggestion.number, None), failed + 1
        else:
            result = TrialResult(suggestion.number, max(0.0, 0.5 - x))
        searcher.observe(result)
    assert len(searcher._results) == 60 - failed  # a failed trial teaches nothing
    proposals = [_x(searcher.suggest()) for _ in range(30)]
    assert np.mean(np.array(proposals) < 0.3) > 0.6


def test_a_proposals_work_does_not_grow_with_the_trials() -> None:
    searcher = _searcher()
    _run(searcher, 600)
    early = searcher.work.per_proposal()
    _run(searcher, 2400)
    assert searcher.work.per_proposal() < 1.5 * early + 24 * 2 * 600  # bounded, not 3,000-wide
    assert searcher.fits < 600 + 20 * 8  # every result below 20, then a twentieth at a time


def test_a_restored_searcher_proposes_as_the_live_one() -> None:
    live = _searcher()
    history = _run(live, 30)
    running = live.suggest()  # still running when the controller died
    restored = _searcher()
    for suggestion in history:
        restored.restore(
            suggestion.number, suggestion.config, TrialResult(suggestion.number, _x(suggestion))
        )
    restored.restore(running.number, running.config, None)
    # the same results, and the running trial among the liar's (its draws start afresh)
    assert restored._results == live._results and restored._pending == live._pending == {30}
    assert restored.suggest().number == live.suggest().number == 31
