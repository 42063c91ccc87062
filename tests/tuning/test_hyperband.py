"""Hyperband's decisions against a worked example, by hand.

min_resource=1, max_resource=9, eta=3, maximise, seed 0:
  s_max = log3(9) = 2, so three brackets: rungs [1, 3], [3] and [] (the last runs everything
  to 9). Hyperband's counts per bracket are 9, 5, 3 (weights 9/17, 5/17, 3/17); with seed 0
  trials 0..11 draw brackets 1, 2, 0, 2, 2, 0, 0, 0, 1, 1, 0, 0.
At a rung, a trial goes on if it is among the best max(1, n // 3) of the n values recorded there.
"""

from __future__ import annotations

from typing import Any

import pytest

from scaletune.spec import ObjectiveType
from scaletune.tuning import Decision, HyperbandScheduler, hyperband_scheduler
from scaletune.tuning._ranking import ForecastValue


@pytest.fixture
def hyperband() -> HyperbandScheduler:
    return hyperband_scheduler(
        ObjectiveType.MAXIMIZE, min_resource=1, max_resource=9, eta=3, seed=0
    )


def test_brackets_and_their_draw(hyperband: HyperbandScheduler) -> None:
    assert [bracket.rungs for bracket in hyperband.brackets] == [[1, 3], [3], []]
    assert [hyperband.bracket_of(trial) for trial in range(12)] == [
        1,
        2,
        0,
        2,
        2,
        0,
        0,
        0,
        1,
        1,
        0,
        0,
    ]
    again = hyperband_scheduler(ObjectiveType.MAXIMIZE, min_resource=1, max_resource=9, seed=0)
    assert [again.bracket_of(trial) for trial in reversed(range(12))] == [
        0,
        0,
        1,
        1,
        0,
        0,
        0,
        2,
        2,
        0,
        2,
        1,
    ]  # the same draw, whatever the order of asking


def test_trials_wait_for_a_verdict_at_every_rung_below_max_resource(
    hyperband: HyperbandScheduler,
) -> None:
    # Rungs 1 and 3 (bracket 0), 3 (bracket 1); at 9 a trial finishes by itself.
    assert hyperband.judged_steps(None) == frozenset({1, 3})


def test_the_worked_example(hyperband: HyperbandScheduler) -> None:
    def decide(trial: int, resource: int, value: float) -> Decision:
        return hyperband.on_report(trial, resource, value).decision

    # Bracket 0, rung 1, in order of arrival: trials 2, 5, 6, 7, 10, 11.
    assert decide(2, 1, 0.70) is Decision.CONTINUE  # 1 value: best 1 of 1
    assert decide(5, 1, 0.60) is Decision.STOP  # best 1 of [0.70, 0.60] is 0.70
    assert decide(6, 1, 0.80) is Decision.CONTINUE  # 0.80 is the best of 3
    assert decide(7, 1, 0.75) is Decision.STOP  # best 1 of 4 is 0.80
    assert decide(10, 1, 0.78) is Decision.STOP  # best 1 of 5 is 0.80
    assert decide(11, 1, 0.79) is Decision.CONTINUE  # 6 values: best 2 are 0.80, 0.79
    # Between rungs nothing is judged, however bad.
    assert decide(2, 2, 0.10) is Decision.CONTINUE
    # Bracket 0, rung 3: trials 2, 6, 11.
    assert decide(2, 3, 0.72) is Decision.CONTINUE
    assert decide(6, 3, 0.85) is Decision.CONTINUE
    verdict = hyperband.on_report(11, 3, 0.74)
    assert verdict.decision is Decision.STOP
    assert verdict.reason == "bracket 0 rung 3: 0.74 not in the best 1 of 3"
    # Past the last rung, a trial runs to max_resource and is finished there.
    assert decide(6, 8, 0.20) is Decision.CONTINUE
    assert decide(6, 9, 0.86) is Decision.FINISH
    # Bracket 1 (rung 3 only): trials 0, 8, 9.
    assert decide(0, 1, 0.10) is Decision.CONTINUE  # no rung at 1 in this bracket
    assert decide(0, 3, 0.50) is Decision.CONTINUE
    assert decide(8, 3, 0.40) is Decision.STOP
    assert decide(9, 3, 0.90) is Decision.CONTINUE
    # Bracket 2 has no rungs: plain random search, every trial to max_resource.
    for trial in (1, 3, 4):
        assert [decide(trial, r, 0.01) for r in range(1, 9)] == [Decision.CONTINUE] * 8
        assert decide(trial, 9, 0.01) is Decision.FINISH


def test_minimising_ranks_the_other_way() -> None:
    hyperband = hyperband_scheduler(ObjectiveType.MINIMIZE, min_resource=1, max_resource=9, seed=0)
    assert hyperband.on_report(2, 1, 0.5).decision is Decision.CONTINUE
    assert hyperband.on_report(5, 1, 0.9).decision is Decision.STOP  # higher loss is worse
    assert hyperband.on_report(6, 1, 0.1).decision is Decision.CONTINUE


def test_never_judged_before_min_resource() -> None:
    hyperband = hyperband_scheduler(ObjectiveType.MAXIMIZE, min_resource=2, max_resource=18, seed=0)
    assert [bracket.rungs for bracket in hyperband.brackets] == [[2, 6], [6], []]
    for trial in range(20):
        assert hyperband.on_report(trial, 1, -float(trial)).decision is Decision.CONTINUE


def test_bracket_draws_follow_hyperband_weights() -> None:
    hyperband = hyperband_scheduler(ObjectiveType.MAXIMIZE, min_resource=1, max_resource=30, seed=7)
    assert [bracket.rungs for bracket in hyperband.brackets] == [
        [1, 3, 9, 27],
        [3, 9, 27],
        [9, 27],
        [27],
    ]
    draws = [hyperband.bracket_of(trial) for trial in range(4900)]
    shares = [draws.count(b) / len(draws) for b in range(4)]
    assert shares == pytest.approx([27 / 49, 12 / 49, 6 / 49, 4 / 49], abs=0.02)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_resource": 0, "max_resource": 9}, "1 <= min_resource < max_resource"),
        ({"min_resource": 9, "max_resource": 9}, "1 <= min_resource < max_resource"),
        ({"min_resource": 1, "max_resource": 9, "eta": 1}, "eta must be 2 or more"),
    ],
)
def test_bad_settings(kwargs: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        hyperband_scheduler(ObjectiveType.MAXIMIZE, **kwargs)


def _two_objectives(**kwargs: Any) -> HyperbandScheduler:
    from scaletune.analysis._pareto import Direction

    settings: dict[str, Any] = {"seed": 0, **kwargs}
    return hyperband_scheduler(
        ObjectiveType.MAXIMIZE,
        min_resource=1,
        max_resource=9,
        eta=3,
        brackets=1,
        objectives=[Direction("accuracy", True), Direction("billable_seconds", False)],
        **settings,
    )


def test_with_two_objectives_a_point_that_beats_the_rung_on_both_goes_on() -> None:
    hyperband = _two_objectives()
    for trial, point in enumerate([(0.5, 10.0), (0.6, 12.0), (0.4, 8.0), (0.55, 11.0)]):
        hyperband.on_report(trial, 1, point[0], [point[1]])
    # Whatever its trade-off, a point better than all others on both is at distance 0.
    assert hyperband.on_report(4, 1, 0.9, [5.0]).decision is Decision.CONTINUE


def test_with_two_objectives_a_point_beaten_on_both_by_every_other_is_stopped() -> None:
    hyperband = _two_objectives()
    for trial, point in enumerate([(0.5, 10.0), (0.6, 12.0), (0.4, 8.0), (0.55, 11.0)]):
        hyperband.on_report(trial, 1, point[0], [point[1]])
    verdict = hyperband.on_report(4, 1, 0.1, [20.0])
    assert verdict.decision is Decision.STOP
    assert "rung 1" in (verdict.reason or "")


def test_with_two_objectives_the_cheap_end_and_the_good_end_can_both_survive() -> None:
    # A rung of two trade-offs: which of the extremes goes on depends on each trial's own
    # weights, so over many trials both the cheap and the accurate end keep survivors.
    survivors = {"cheap": 0, "accurate": 0}
    for trial in range(0, 300, 3):
        hyperband = _two_objectives(seed=trial)
        hyperband.on_report(trial, 1, 0.5, [10.0])
        hyperband.on_report(trial + 1, 1, 0.5, [10.0])
        cheap = hyperband.on_report(trial + 2, 1, 0.2, [2.0]).decision is Decision.CONTINUE
        survivors["cheap"] += cheap
        hyperband = _two_objectives(seed=trial)
        hyperband.on_report(trial, 1, 0.5, [10.0])
        hyperband.on_report(trial + 1, 1, 0.5, [10.0])
        accurate = hyperband.on_report(trial + 2, 1, 0.9, [30.0]).decision is Decision.CONTINUE
        survivors["accurate"] += accurate
    assert survivors["cheap"] > 10 and survivors["accurate"] > 10


def test_with_two_objectives_a_paused_trial_is_promoted_by_its_own_trade_off() -> None:
    from scaletune.spec import HyperbandType

    hyperband = _two_objectives(kind=HyperbandType.PROMOTION)
    assert hyperband.on_report(0, 1, 0.5, [10.0]).decision is Decision.CONTINUE
    assert hyperband.on_report(1, 1, 0.1, [20.0]).decision is Decision.PAUSE
    assert hyperband.promote() is None
    for trial in range(2, 6):  # worse on both than the paused one: it ranks now
        hyperband.on_report(trial, 1, 0.05, [25.0])
    assert hyperband.promote() == 1


def one_bracket(
    min_resource: int, max_resource: int, eta: int = 3, **more: Any
) -> HyperbandScheduler:
    """Plain asynchronous successive halving (one bracket), maximising, seed 0."""
    return hyperband_scheduler(
        ObjectiveType.MAXIMIZE,
        min_resource=min_resource,
        max_resource=max_resource,
        eta=eta,
        seed=0,
        brackets=1,
        **more,
    )


def slow_and_fast(step: int) -> tuple[float, float]:
    """Two curves: a fast learner that levels off at 0.70, and a slow one heading for 0.90
    that stands below it until step 12 (pow3: a - b * step**-c)."""
    return 0.70 - 0.20 * step**-2.0, 0.90 - 0.50 * step**-0.5


def test_ranking_by_forecast_keeps_the_slow_learner_that_will_end_first() -> None:
    by_value = one_bracket(4, 40, eta=2)
    by_forecast = one_bracket(4, 40, eta=2, rank_by="forecast")
    assert by_value.brackets[0].rungs == by_forecast.brackets[0].rungs == [4, 8, 16, 32]
    verdicts = {}
    for name, hyperband in (("value", by_value), ("forecast", by_forecast)):
        for step in range(1, 5):  # the fast one (trial 0) reaches rung 4 first
            fast, slow = slow_and_fast(step)
            assert hyperband.on_report(0, step, fast).decision is Decision.CONTINUE
            verdicts[name] = hyperband.on_report(1, step, slow)
    # At step 4 the slow one stands at 0.65 against 0.6875: by value it is stopped ...
    assert verdicts["value"].decision is Decision.STOP
    assert verdicts["value"].reason == "bracket 0 rung 4: 0.65 not in the best 1 of 2"
    # ... by forecast it is the one heading higher (0.90 - 0.50 / sqrt(40) = 0.82 at 40).
    assert verdicts["forecast"].decision is Decision.CONTINUE
    recorded = by_forecast.brackets[0].recorded[4]
    assert recorded == pytest.approx([0.70 - 0.20 * 40**-2.0, 0.90 - 0.50 * 40**-0.5], abs=1e-3)


def test_a_rung_too_early_to_forecast_judges_nothing() -> None:
    hyperband = one_bracket(1, 27, rank_by="forecast")
    assert hyperband.brackets[0].rungs == [1, 3, 9]
    for trial in range(6):  # rungs 1 and 3 come before a trial has 4 reports
        for step in range(1, 4):
            assert hyperband.on_report(trial, step, -float(trial)).decision is Decision.CONTINUE
    assert hyperband.brackets[0].recorded == {}
    verdicts = []
    for trial in range(6):  # at rung 9 each has 9 reports: flat curves, ranked by level
        for step in range(4, 9):
            hyperband.on_report(trial, step, -float(trial))
        verdicts.append(hyperband.on_report(trial, 9, -float(trial)))
    # the best max(1, n // 3) of n: trial 0 leads from the start; none after it is in the best
    assert [v.decision for v in verdicts] == [Decision.CONTINUE] + [Decision.STOP] * 5
    assert verdicts[5].reason == "bracket 0 rung 9: forecast -5 not in the best 2 of 6"


def test_a_job_too_short_for_any_rung_to_forecast_ranks_values_there() -> None:
    # 5 steps: rungs at 1 and 3, neither with the 4 reports a forecast needs, nor any after
    # them. Judging nothing would run every trial to its end.
    hyperband = one_bracket(1, 5, rank_by="forecast")
    assert hyperband.brackets[0].rungs == [1, 3]
    verdicts = [hyperband.on_report(trial, 1, float(trial)) for trial in range(6)]
    assert [v.decision for v in verdicts] == [Decision.CONTINUE] * 6  # each better than before
    late = hyperband.on_report(6, 1, -1.0)
    assert late.decision is Decision.STOP
    assert late.reason == "bracket 0 rung 1: -1 not in the best 2 of 7"  # a value, not forecast
    # rung 3 too, by the value there
    for step in (2, 3):
        verdicts = [hyperband.on_report(trial, step, float(trial)) for trial in (5, 0)]
    assert [v.decision for v in verdicts] == [Decision.CONTINUE, Decision.STOP]


def test_a_resumed_attempt_reporting_anew_replaces_the_steps_it_repeats() -> None:
    interrupted, straight = (one_bracket(6, 60, rank_by="forecast") for _ in range(2))
    for step in range(1, 6):  # reports 4 and 5 are lost with the attempt; 4.. come again
        interrupted.on_report(0, step, 0.9 if step >= 4 else 0.1 * step)
    for step in range(4, 7):
        interrupted.on_report(0, step, 0.1 * step)
    for step in range(1, 7):
        straight.on_report(0, step, 0.1 * step)
    assert interrupted.brackets[0].recorded == straight.brackets[0].recorded
    assert len(straight.brackets[0].recorded[6]) == 1


def test_a_curve_is_kept_only_while_its_trial_has_rungs_ahead() -> None:
    hyperband = one_bracket(4, 40, rank_by="forecast")
    assert hyperband.brackets[0].rungs == [4, 12, 36]
    assert isinstance(hyperband.ranked, ForecastValue)
    curves = hyperband.ranked.curves  # what a run of 10,000 trials holds in memory
    for step in range(1, 40):
        hyperband.on_report(0, step, 1 - 1 / step)
        assert (0 in curves) is (step < 36)
    assert hyperband.brackets[0].recorded[36]  # judged at its last rung, then forgotten
