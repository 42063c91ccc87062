"""What a job would cost on spot capacity: the simulation of its measured step and restart
times under preemptions, worked by hand on small cases; the drawn process; the mix chosen."""

from __future__ import annotations

import math
import random

import pytest

from scaletune.advice import JobShape, Mix, MixPrediction, Preemption, SpotMarket, simulate
from scaletune.advice._spot import draw_preemptions, predict_mixes, recommend_mix


def _shape(checkpoint_seconds: float = math.inf, fewest: int = 2) -> JobShape:
    # 100 steps of 1/n s on n workers (all parallel), a restart of 5 s, 4 workers at most.
    return JobShape(100, lambda n: 1.0 / n, 5.0, checkpoint_seconds, 4, fewest)


def test_on_demand_is_one_start_and_every_step_on_its_size() -> None:
    outcome = simulate(_shape(), Mix.ON_DEMAND, [Preemption(10.0, 5.0, 30.0)])
    assert outcome.wall_seconds == pytest.approx(5 + 100 / 4)  # spot events are not its
    assert outcome.on_demand_seconds == pytest.approx(4 * 30)
    assert outcome.spot_seconds == 0
    assert outcome.preemptions == 0


def test_a_notice_a_step_long_loses_nothing_and_the_job_goes_on_smaller() -> None:
    # The machine goes at 20 s with 10 s of notice: the job leaves it at 10 s, having done 20
    # steps (5 s to start, 5 s at 4 workers), restarts on 3 (5 s) and does the last 80 steps
    # at 1/3 s each, done at 41.67 s, before the machine is back (50 s).
    outcome = simulate(_shape(), Mix.SPOT, [Preemption(20.0, 10.0, 30.0)])
    assert outcome.wall_seconds == pytest.approx(15 + 80 / 3)
    assert outcome.steps_redone == 0
    assert outcome.on_demand_seconds == 0
    assert outcome.spot_seconds == pytest.approx(4 * 10 + 3 * (80 / 3 + 5))
    assert outcome.preemptions == 1


def test_a_notice_shorter_than_a_step_loses_the_work_since_the_last_checkpoint() -> None:
    # No notice, checkpoints every 2 s of training: at 10 s, 5 s trained (20 steps), the last
    # checkpoint at 4 s (16 steps): 4 steps redone.
    outcome = simulate(_shape(checkpoint_seconds=2.0), Mix.SPOT, [Preemption(10.0, 0.0, 300.0)])
    assert outcome.steps_redone == pytest.approx(4)
    assert outcome.wall_seconds == pytest.approx(10 + 5 + 84 / 3)


def test_mixed_bills_its_fewest_on_demand_and_grows_back_when_a_machine_returns() -> None:
    # Left at 10 s (20 steps), 3 workers from 15 s; the machine is back at 20 + 1 = 21 s:
    # 6 s at 3 workers (18 steps), a restart to 4 at 21 s, 62 steps at 1/4 s from 26 s.
    outcome = simulate(_shape(), Mix.MIXED, [Preemption(20.0, 10.0, 1.0)])
    assert outcome.wall_seconds == pytest.approx(26 + 62 / 4)
    assert outcome.on_demand_seconds == pytest.approx(2 * outcome.wall_seconds)
    assert outcome.spot_seconds == pytest.approx(2 * 10 + 1 * 11 + 2 * (outcome.wall_seconds - 21))


def test_an_elastic_job_below_its_fewest_waits_unbilled_for_capacity() -> None:
    events = [Preemption(20.0, 10.0, 100.0), Preemption(21.0, 10.0, 100.0)]
    two_left = simulate(_shape(fewest=3), Mix.SPOT, events)
    # 3 left at 10 s, 2 at 11 s: below 3, it waits until the first is back at 120 s.
    assert two_left.wall_seconds > 120
    waited = simulate(_shape(fewest=2), Mix.SPOT, events)
    assert waited.wall_seconds < 120


def test_preemptions_are_drawn_per_machine_at_the_rate_given() -> None:
    market = SpotMarket(3600 / 100, 30.0, 50.0, 0.3)  # one per 100 s per machine
    events = draw_preemptions(market, 4, 100_000.0, random.Random(0))
    # Each machine: a preemption every 100 s on average, none while it is away (50 s).
    assert len(events) == pytest.approx(4 * 100_000 / 150, rel=0.1)
    assert events == sorted(events, key=lambda event: event.at)
    assert draw_preemptions(SpotMarket(0.0, 30, 50, 0.3), 4, 1e6, random.Random(0)) == []


def test_the_cheapest_mix_within_the_time_ratio_is_recommended() -> None:
    def mix(which: Mix, wall: float, cost: float) -> MixPrediction:
        return MixPrediction(which, wall, cost, cost, 0.0, 0.0, 0.0, 0.0)

    predictions = [mix(Mix.ON_DEMAND, 100, 400), mix(Mix.SPOT, 200, 100), mix(Mix.MIXED, 140, 250)]
    assert recommend_mix(predictions, 1.5) is Mix.MIXED  # spot is twice as slow
    assert recommend_mix(predictions, 2.0) is Mix.SPOT
    # Rare preemptions: spot is the cheapest and about as fast; with no spot discount, not.
    cheap = predict_mixes(_shape(), SpotMarket(0.1, 30.0, 300.0, 0.3), runs=50)
    assert recommend_mix(cheap, 1.5) is Mix.SPOT
    even = predict_mixes(_shape(), SpotMarket(0.1, 30.0, 300.0, 1.0), runs=50)
    assert recommend_mix(even, 1.5) is Mix.ON_DEMAND


def test_a_restart_costs_what_the_quickest_attempt_took_before_its_first_step() -> None:
    from scaletune.advice import start_seconds
    from scaletune.store import AttemptRecord, JobStatus, MetricPoint

    def attempt(number: int, start: float, end: float) -> AttemptRecord:
        return AttemptRecord(number, start, end, JobStatus.STOPPED, None, True, None, None, None)

    # Steps of 1 s; the first attempt (cold workers) reports 5 s after its start, the second
    # (warm) 1.5 s after: a restart costs 0.5 s.
    series = [MetricPoint("loss", step, 1.0, time) for step, time in [(1, 5), (2, 6), (3, 21.5)]]
    attempts = [attempt(1, 0.0, 10.0), attempt(2, 20.0, 30.0)]
    assert start_seconds(attempts, series, 1.0) == pytest.approx(0.5)
    assert start_seconds([], series, 1.0) is None
