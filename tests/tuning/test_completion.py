"""Completion rules: the expected improvement of more trials, the rules that end a search on
it, and a tuning job that ends by them and says why."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from scaletune.simulation import simulate_tuning
from scaletune.spec import tuning_spec_from_dict
from scaletune.store import JobStatus, Store
from scaletune.tuning._completion import (
    MIN_ENDED_TRIALS,
    Convergence,
    ImprovementPerCost,
    Outlook,
    SearchHistory,
)
from scaletune.tuning._tally import Tally
from tests.simulated import RisingCurves


def test_the_next_trials_improvement_is_estimated_on_the_safe_side_of_the_truth() -> None:
    # One more trial improves the best of 100 by E[top gap of 101] / 101 on average: 1/101
    # for exponential results, 1/(101 * 102) for uniform ones.
    rng = np.random.default_rng(0)

    def mean_estimate(draw: str) -> float:
        estimates = []
        for _ in range(200):
            history = SearchHistory()
            for number, value in enumerate(getattr(rng, draw)(size=100)):
                history.add(str(number), 1.0, float(value))
            outlook = history.outlook()
            assert outlook is not None
            estimates.append(outlook.next_trial)
        return float(np.mean(estimates))

    assert 0.85 < mean_estimate("exponential") * 101 < 1.15  # unbiased on an exponential tail
    # (SPACINGS + 1) / 2 times the truth on a bounded one: it errs towards going on
    assert 2.5 < mean_estimate("uniform") * 101 * 102 < 3.5


def test_no_outlook_before_enough_trials_and_a_resumed_trial_counts_once() -> None:
    history = SearchHistory()
    for number in range(MIN_ENDED_TRIALS - 1):
        history.add(f"t{number}", 10.0, float(number))
    assert history.outlook() is None
    history.add("t0", 25.0, 50.0)  # paused at 0.0, went on and ended at 50.0: still 9 trials
    assert (history.ended, history.billable_seconds) == (MIN_ENDED_TRIALS - 1, 105.0)
    history.add("failed", 5.0, None)  # it cost, and brought no result
    outlook = history.outlook()
    assert outlook is not None and outlook.ended == MIN_ENDED_TRIALS
    assert outlook.best == 50.0 and outlook.seconds_per_trial == pytest.approx(11.0)
    assert [job for _, job in history.top] == ["t0", "t8", "t7", "t6", "t5", "t4"]  # t0 once


def test_convergence_is_sagemakers_one_percent_of_the_best() -> None:
    def outlook(next_trial: float) -> Outlook:
        return Outlook(best=-80.0, next_trial=next_trial, ended=19, seconds_per_trial=60.0)

    # 19 more trials would add 20 * next_trial * ln 2; 1 % of |-80| is 0.8
    going_on = outlook(0.8 / (20 * math.log(2)) * 1.01)
    assert Convergence().verdict(going_on) is None
    converged = Convergence().verdict(outlook(0.8 / (20 * math.log(2)) * 0.99))
    assert converged == (
        "converged: 19 more trials would improve the best by about 0.99% "
        "(1 % or less counts as none)"
    )


def test_improvement_per_cost_compares_the_next_trial_with_its_billable_hours() -> None:
    half_hour = Outlook(best=0.9, next_trial=0.01, ended=12, seconds_per_trial=1800.0)
    assert ImprovementPerCost(0.02).verdict(half_hour) is None  # 0.02 an hour: just pays
    assert ImprovementPerCost(0.021).verdict(half_hour) == (
        "min_improvement_per_cost=0.021 not met: the next trial would improve the best by "
        "about 0.01 for 1,800 billable seconds, 0.02 per worker-hour"
    )


def test_a_minimised_objective_is_a_gain_once_and_infeasible_results_count_as_none() -> None:
    tally = Tally(maximize=False, rules=(Convergence(),))
    for number in range(MIN_ENDED_TRIALS):
        loss = 1.0 + number / 1000  # the first trial is the best, never improved
        tally.consider(loss)
        tally.spent(f"t{number}", 1.0, loss)
    tally.spent("cheat", 1.0, 0.0, feasible=False)
    assert tally.history.top[0] == (-1.0, "t0")
    assert tally.halt_reason is not None and tally.halt_reason.startswith("converged")


def _random_search(folder: Path, completion: dict[str, object]) -> tuple[int, str | None, float]:
    spec = tuning_spec_from_dict(
        {
            "objective_metric": "accuracy",
            "strategy": "Random",
            "max_jobs": 200,
            "max_parallel_jobs": 2,
            "seed": 1,
            "ranges": {"x": {"type": "Continuous", "min_value": 0, "max_value": 1}},
            "completion": completion,
            "training": {"algorithm": "script", "script": {"entry_point": "simulated"}},
        }
    )
    with Store(f"sqlite:///{folder / f'{len(completion)}.db'}") as store:
        record = simulate_tuning(spec, RisingCurves(), store)
        assert record.status is JobStatus.COMPLETED and record.failure_reason is None
        assert record.best_objective is not None
        return (
            len(store.training_jobs_of(record.id)),
            record.completion_reason,
            record.best_objective,
        )


def test_a_tuning_job_ends_by_its_rule_and_records_why(tmp_path: Path) -> None:
    full, reason, best = _random_search(tmp_path, {})
    assert (full, reason) == (200, "max_jobs=200 reached")
    trials, reason, found = _random_search(
        tmp_path, {"convergence": True, "min_improvement_per_cost": 0.05}
    )
    assert MIN_ENDED_TRIALS <= trials < full
    assert reason is not None and reason.startswith("min_improvement_per_cost=0.05 not met")
    assert found > 0.99 * best  # uniform x in [0, 1]: the rule ends it once it is near the top


def test_a_resumed_job_learns_again_what_its_ended_trials_spent(tmp_path: Path) -> None:
    from scaletune.simulation._clock import SimulatedClock
    from scaletune.simulation._runner import SimulatedTrialRunner
    from scaletune.tuning import TuningController
    from scaletune.tuning._tuner import _Run
    from tests.simulated import simulated_tuning

    with Store(f"sqlite:///{tmp_path / 's.db'}") as store:
        record = simulated_tuning(store, 30)
        trials = store.training_jobs_of(record.id)
        spec = tuning_spec_from_dict({**record.spec, "completion": {"convergence": True}})
        clock = SimulatedClock(0.0)
        tuner = TuningController(SimulatedTrialRunner(store, RisingCurves(), clock), clock=clock)
        run = _Run(tuner, record.id, spec)
        run.restore()
    history = run.tally.history
    assert history.ended == len(trials) == 30
    assert history.billable_seconds == pytest.approx(sum(t.billable_seconds or 0 for t in trials))
    assert history.top[0][0] == record.best_objective
