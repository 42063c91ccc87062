"""Proposals from a model of every trial's latest value, running trials included."""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any

from scaletune.spec import ContinuousRange, ObjectiveType, TuningJobSpec, tuning_spec_from_dict
from scaletune.tuning import Suggestion, TrialResult
from scaletune.tuning._lastvalue import LastValueSearcher
from scaletune.tuning._quantile import TPEThenQuantileSearcher
from scaletune.tuning._searchers import OptunaSearcher
from scaletune.tuning._strategy import make_searcher
from tests.simulated import late_mean_x
from tests.spec.test_objectives import AUC, BILLABLE, _objectives
from tests.spec.test_tuning_spec import _raw

RANGES = {"x": ContinuousRange(min_value=0, max_value=1)}


def _searcher(**kwargs: object) -> LastValueSearcher:
    return LastValueSearcher(RANGES, ObjectiveType.MAXIMIZE, 0, **kwargs)  # type: ignore[arg-type]


def _x(suggestion: Suggestion) -> float:
    return float(suggestion.config["x"])  # type: ignore[arg-type]


def test_random_until_enough_trials_have_reported_then_a_model() -> None:
    searcher = _searcher(random_fraction=0.0, n_startup=3)
    first = [searcher.suggest() for _ in range(3)]
    for suggestion in first[:2]:
        searcher.on_report(suggestion.number, 1, _x(suggestion))
    searcher.suggest()
    assert searcher.fits == 0  # two trials with a value: not enough
    searcher.on_report(first[2].number, 1, _x(first[2]))
    searcher.suggest()
    assert searcher.fits == 1


def test_the_model_learns_each_trials_latest_report_running_or_not() -> None:
    searcher = _searcher()
    running, stopped, failed = (searcher.suggest() for _ in range(3))
    for step, value in ((1, 0.2), (3, 0.5)):
        searcher.on_report(running.number, step, value)
    searcher.on_report(running.number, 1, 0.2)  # an older report again (a replay): no change
    searcher.on_report(stopped.number, 1, 0.1)
    searcher.observe(TrialResult(stopped.number, 0.1, resource=1, stopped_early=True))
    searcher.on_report(failed.number, 1, 0.9)
    searcher.observe(TrialResult(failed.number, None))  # failed: what it reported is dropped
    assert searcher.latest() == {running.number: 0.5, stopped.number: 0.1}


def test_proposals_move_to_where_the_latest_values_are_good() -> None:
    searcher = _searcher(random_fraction=0.0)
    distances = []
    for _ in range(60):  # the objective rewards x near 0.8; every trial is still running
        suggestion = searcher.suggest()
        value = -abs(_x(suggestion) - 0.8)
        searcher.on_report(suggestion.number, 1, value)
        distances.append(-value)
    # Uniform proposals are 0.34 away on average; the model's, half that at most.
    assert statistics.fmean(distances[30:]) < 0.17


def test_fewer_candidates_spread_proposals_around_the_best_instead_of_onto_it() -> None:
    """TPE keeps the best l(x)/g(x) of its candidates: Optuna's 24 put nearly every proposal
    on the best value seen, the default 8 still near it but wider (what lets a search that
    has narrowed onto a poor region find its way out: benchmarks/README.md)."""

    def spread(candidates: int) -> tuple[float, float]:
        searcher = _searcher(random_fraction=0.0, candidates=candidates)
        for i in range(40):  # the objective peaks at 0.8
            x = (i + 0.5) / 40
            searcher.add_prior({"x": x}, -abs(x - 0.8))
        xs = [_x(searcher.suggest()) for _ in range(50)]
        return statistics.pstdev(xs), statistics.fmean(abs(x - 0.8) for x in xs)

    greedy, default = spread(24), spread(8)
    assert default[0] > 2 * greedy[0]
    assert default[1] < 0.05  # still around the best


def test_the_model_is_rebuilt_as_values_change_not_on_every_report() -> None:
    searcher = _searcher(random_fraction=0.0)
    for _ in range(400):
        suggestion = searcher.suggest()
        for step in (1, 2, 3):
            searcher.on_report(suggestion.number, step, _x(suggestion) * step)
    # 1200 reports, 395 proposals from the model: a rebuild once a twentieth of the values
    # have changed (five at least), so ever fewer rebuilds a trial as trials accumulate
    # (about 60 for the first 100 trials, about 80 for the next 300).
    assert 100 < searcher.fits < 160


def test_a_restored_searcher_learns_the_same_latest_values() -> None:
    live = _searcher()
    history = []
    for number in range(12):
        suggestion = live.suggest()
        value = _x(suggestion)
        for step in (1, 3):
            live.on_report(suggestion.number, step, value * step)
        if number == 0:  # failed after its reports
            live.observe(TrialResult(suggestion.number, None))
        elif number < 10:  # stopped; the last two still running
            live.observe(TrialResult(suggestion.number, value * 3, resource=3, stopped_early=True))
        history.append(suggestion)
    restored = _searcher()
    for suggestion in history:
        value = _x(suggestion)
        running = suggestion.number >= 10
        told = None if suggestion.number == 0 else value * 3  # trial 0 failed
        ended = TrialResult(suggestion.number, told, resource=3, stopped_early=True)
        restored.restore(suggestion.number, suggestion.config, None if running else ended)
    for suggestion in history:  # the tuner replays the stored reports, the failed trial's too
        for step in (1, 3):
            restored.on_report(suggestion.number, step, _x(suggestion) * step)
    assert restored.latest() == live.latest()
    assert sorted(restored.latest()) == list(range(1, 12))
    assert restored.suggest().number == live.suggest().number == 12


def test_priors_count_at_full_length_and_priors_outside_the_ranges_are_skipped() -> None:
    searcher = _searcher(n_startup=1, random_fraction=0.0)
    assert searcher.add_prior({"x": 0.5}, 0.9)
    assert not searcher.add_prior({"x": 1.5}, 0.9)
    assert not searcher.add_prior({"y": 0.5}, 0.9)
    assert searcher.latest() == {-1: 0.9}
    searcher.suggest()
    assert searcher.fits == 1  # the prior is enough to start the model


def test_last_value_proposals_in_a_simulated_hyperband_job(tmp_path: Path) -> None:
    """accuracy = x (1 - e^-step): the model should propose larger x than random search."""
    assert late_mean_x(tmp_path, "LastValueTPE") > late_mean_x(tmp_path, "Random") + 0.1


def _stored_and_loaded(raw: dict[str, Any]) -> TuningJobSpec:
    """The spec as the store keeps it and a resume reads it back."""
    return TuningJobSpec.model_validate(tuning_spec_from_dict(raw).model_dump(mode="json"))


def test_hyperband_proposes_tpe_then_cqr_by_default_random_with_several_objectives() -> None:
    one = _stored_and_loaded(_raw())
    assert one.hyperband is not None and one.hyperband.searcher is None
    assert one.hyperband_searcher == "LastValueTPEThenCQR"
    assert isinstance(make_searcher(one), TPEThenQuantileSearcher)
    several = _stored_and_loaded(_objectives(AUC, BILLABLE))
    assert several.hyperband_searcher == "Random"  # its models fit one objective
    assert _is_random(make_searcher(several))
    # A job that named its searcher (as every job stored before this default did) keeps it.
    named = _stored_and_loaded(_raw(hyperband={"max_resource": 27, "searcher": "Random"}))
    assert named.hyperband_searcher == "Random"
    assert _is_random(make_searcher(named))


def _is_random(searcher: object) -> bool:
    from optuna.samplers import RandomSampler

    return isinstance(searcher, OptunaSearcher) and isinstance(
        searcher._study.sampler, RandomSampler
    )
