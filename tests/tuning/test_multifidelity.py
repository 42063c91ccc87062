"""BOHB-style proposals: a model on the highest rung with enough results."""

from __future__ import annotations

import statistics
from pathlib import Path

from scaletune.spec import ContinuousRange, ObjectiveType
from scaletune.tuning import Suggestion, TrialResult
from scaletune.tuning._multifidelity import RungModelSearcher
from tests.simulated import late_mean_x

RANGES = {"x": ContinuousRange(min_value=0, max_value=1)}


def _searcher(**kwargs: object) -> RungModelSearcher:
    return RungModelSearcher(RANGES, ObjectiveType.MAXIMIZE, 0, [1, 3, 9], **kwargs)  # type: ignore[arg-type]


def _x(suggestion: Suggestion) -> float:
    return float(suggestion.config["x"])  # type: ignore[arg-type]


def test_random_until_a_rung_has_enough_results_then_the_highest_such_rung() -> None:
    searcher = _searcher()  # one hyperparameter: a model needs 3 results at a rung
    first = [searcher.suggest() for _ in range(4)]
    assert [s.number for s in first] == [0, 1, 2, 3]
    for suggestion in first[:2]:
        searcher.on_report(suggestion.number, 1, _x(suggestion))
    searcher.suggest()
    assert searcher.model_level is None  # 2 results at rung 1: not enough
    searcher.on_report(first[2].number, 1, _x(first[2]))
    for _ in range(10):  # a third of proposals stay random: the model is fitted by now
        searcher.suggest()
    assert searcher.model_level == 1
    for suggestion in first[:3]:
        searcher.on_report(suggestion.number, 3, _x(suggestion))
    for _ in range(10):
        searcher.suggest()
    assert searcher.model_level == 3  # the highest rung with enough results wins


def test_proposals_move_to_where_the_rung_results_are_good() -> None:
    searcher = _searcher(random_fraction=0.0)
    distances = []
    for _ in range(40):  # the objective at rung 1 rewards x near 0.8
        suggestion = searcher.suggest()
        value = -abs(_x(suggestion) - 0.8)
        searcher.on_report(suggestion.number, 1, value)
        searcher.observe(TrialResult(suggestion.number, value, resource=1, stopped_early=True))
        distances.append(-value)
    # Uniform proposals are 0.34 away on average; the model's, half that at most.
    assert statistics.fmean(distances[20:]) < 0.17


def test_a_restored_searcher_fits_the_same_rung_on_the_same_results() -> None:
    live = _searcher()
    history = []
    for _ in range(12):
        suggestion = live.suggest()
        value = _x(suggestion)
        for step in (1, 3):
            live.on_report(suggestion.number, step, value * step)
        live.observe(TrialResult(suggestion.number, value * 3, resource=3, stopped_early=True))
        history.append((suggestion, value))
    restored = _searcher()
    for suggestion, value in history:
        ended = TrialResult(suggestion.number, value * 3, resource=3, stopped_early=True)
        restored.restore(suggestion.number, suggestion.config, ended)
    for suggestion, value in history:  # the tuner replays the stored reports
        for step in (1, 3):
            restored.on_report(suggestion.number, step, value * step)
    assert restored.suggest().number == live.suggest().number == 12
    assert restored.model_level == live.model_level == 3


def test_a_finished_trial_counts_at_full_length_and_priors_outside_the_ranges_are_skipped() -> None:
    searcher = _searcher()
    assert searcher.add_prior({"x": 0.5}, 0.9)
    assert not searcher.add_prior({"x": 1.5}, 0.9)
    assert not searcher.add_prior({"y": 0.5}, 0.9)
    for _ in range(2):
        suggestion = searcher.suggest()
        # Completed: a result at 9.
        searcher.observe(TrialResult(suggestion.number, 0.5, resource=9))
    for _ in range(6):
        searcher.suggest()
    assert searcher.model_level == 9  # the prior and the two completed trials


def test_bohb_proposals_in_a_simulated_hyperband_job(tmp_path: Path) -> None:
    """accuracy = x (1 - e^-step): the model should propose larger x than random search."""
    assert late_mean_x(tmp_path, "BOHB") > late_mean_x(tmp_path, "Random") + 0.1


def test_the_rung_model_is_refitted_as_its_data_changes_not_at_every_proposal() -> None:
    searcher = _searcher(random_fraction=0.0)
    for _ in range(2000):
        suggestion = searcher.suggest()
        searcher.on_report(suggestion.number, 1, _x(suggestion))
        searcher.observe(TrialResult(suggestion.number, _x(suggestion), 1, stopped_early=True))
    # every change while under 20, then once a twentieth has changed: about 20 ln(n) fits
    fits = searcher._fits
    assert 60 < fits < 400
    kernels = searcher.work.per_proposal()
    for _ in range(2000):
        suggestion = searcher.suggest()
        searcher.on_report(suggestion.number, 1, _x(suggestion))
        searcher.observe(TrialResult(suggestion.number, _x(suggestion), 1, stopped_early=True))
    assert searcher._fits - fits < 60  # twice the trials: a few more fits
    assert searcher.work.per_proposal() < 2 * kernels  # a proposal's work stays flat
