"""The simulated backend drives the real tuning loop through a schedule worked out by hand."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from scaletune._verdict import VERDICT_WAIT_SECONDS
from scaletune.analysis import summarize
from scaletune.errors import InvalidInputError
from scaletune.simulation import (
    ClusterCosts,
    Curve,
    CurvePoint,
    SimulatedClock,
    SimulatedTrialRunner,
    simulate_tuning,
)
from scaletune.spec import ObjectiveType, TuningJobSpec, tuning_spec_from_dict
from scaletune.store import JobStatus, Store
from scaletune.training import Stopper
from scaletune.tuning import hyperband_scheduler
from scaletune.worker import Report

COSTS = ClusterCosts(start_seconds=2.0, scaling_efficiency=1.0)


class SequenceSource:
    """The n-th trial gets the n-th value at every step: 2 s per step on one worker."""

    def __init__(
        self,
        values: list[float],
        steps: int = 9,
        fail_at: int | None = None,
        fail_all: bool = False,
    ) -> None:
        self.values, self.steps, self.fail_at, self.fail_all = values, steps, fail_at, fail_all
        self.calls = 0

    def curve(self, hyperparameters: Mapping[str, object], instance_count: int) -> Curve:
        value = self.values[self.calls]
        self.calls += 1
        arrivals = COSTS.arrival_seconds(
            [2.0 * k for k in range(1, self.steps + 1)], instance_count
        )
        points = [
            CurvePoint(step, seconds, {"accuracy": value})
            for step, seconds in zip(range(1, self.steps + 1), arrivals, strict=True)
        ]
        if self.fail_all or (self.fail_at is not None and self.calls - 1 == self.fail_at):
            return Curve(points[:2], self.steps, JobStatus.FAILED, "worker 1 failed: OOM")
        return Curve(points, full_resource=self.steps, start_seconds=COSTS.start_seconds)


def _spec(**changes: Any) -> TuningJobSpec:
    raw: dict[str, Any] = {
        "objective_metric": "accuracy",
        "strategy": "Hyperband",
        # rungs 1 and 3, by hand: values (a forecast needs 4 reports)
        "hyperband": {"min_resource": 1, "max_resource": 9, "eta": 3, "rank_by": "value"},
        "max_jobs": 6,
        "max_parallel_jobs": 2,
        "seed": 1,
        "ranges": {"x": {"type": "Continuous", "min_value": 0, "max_value": 1}},
        "training": {
            "algorithm": "script",
            "instance_count": 2,
            "script": {"entry_point": "simulated-trial"},
        },
    }
    raw.update(changes)
    return tuning_spec_from_dict(raw)


def test_seed_1_puts_every_trial_in_the_most_aggressive_bracket() -> None:
    scheduler = hyperband_scheduler(
        ObjectiveType.MAXIMIZE, min_resource=1, max_resource=9, eta=3, seed=1
    )
    assert [bracket.rungs for bracket in scheduler.brackets] == [[1, 3], [3], []]
    assert [scheduler.bracket_of(n) for n in range(6)] == [0] * 6


def test_a_hand_computed_hyperband_schedule(store: Store) -> None:
    # Two workers per trial at full efficiency: start-up 2 s, then 1 s a step, so step k of
    # a trial started at t arrives at t + 2 + k. Two trials at a time; bracket 0 (rungs 1, 3).
    #   t=0   trials 0 (0.5) and 1 (0.8) start; both pass rung 1 (t=3) and rung 3 (t=5)
    #   t=11  both reach step 9 and complete; trials 2 (0.3) and 3 (0.9) start
    #   t=14  trial 2 at rung 1: 0.3 not in the best 1 of [.5 .8 .3]: stopped; trial 4 starts
    #         trial 3 at rung 1: best of 4 values: goes on; rung 3 at t=16: best of 3
    #   t=17  trial 4 (0.6) at rung 1: not in the best 1 of 5: stopped; trial 5 starts
    #   t=20  trial 5 (0.4) at rung 1: the best 2 of 6 are 0.9 and 0.8: stopped
    #   t=22  trial 3 reaches step 9 and completes: the tuning job ends
    source = SequenceSource([0.5, 0.8, 0.3, 0.9, 0.6, 0.4])
    record = simulate_tuning(_spec(), source, store, start_time=1000.0)
    summary = summarize(store, record.id)
    expected = [
        (JobStatus.COMPLETED, 9, 0.0, 11.0, None),
        (JobStatus.COMPLETED, 9, 0.0, 11.0, None),
        (JobStatus.STOPPED, 1, 11.0, 14.0, "bracket 0 rung 1: 0.3 not in the best 1 of 3"),
        (JobStatus.COMPLETED, 9, 11.0, 22.0, None),
        (JobStatus.STOPPED, 1, 14.0, 17.0, "bracket 0 rung 1: 0.6 not in the best 1 of 5"),
        (JobStatus.STOPPED, 1, 17.0, 20.0, "bracket 0 rung 1: 0.4 not in the best 2 of 6"),
    ]
    got = [
        (
            t.status,
            t.resource,
            (t.start_time or 0) - 1000.0,
            (t.end_time or 0) - 1000.0,
            t.failure_reason,
        )
        for t in store.trials.rows(summary.record.id)
    ]
    assert got == expected
    assert [t.billable_seconds for t in store.trials.rows(summary.record.id)] == [
        22.0,
        22.0,
        6.0,
        22.0,
        6.0,
        6.0,
    ]
    assert record.status is JobStatus.COMPLETED
    assert record.wall_seconds == 22.0
    assert record.best_objective == 0.9
    assert summary.best is not None and summary.best.trial_number == 3
    # Every report reached the store at its simulated moment.
    times = [
        p.time - 1000.0
        for p in store.metrics(store.trials.rows(summary.record.id)[3].id, "accuracy")
    ]
    assert times == [14.0 + k for k in range(9)]


def test_the_tuning_deadline_stops_running_trials_at_that_moment(store: Store) -> None:
    source = SequenceSource([0.5, 0.8, 0.3, 0.9, 0.6, 0.4])
    record = simulate_tuning(_spec(max_runtime_seconds=15.5), source, store)
    trials = store.trials.rows(record.id)
    assert record.status is JobStatus.STOPPED
    assert record.wall_seconds == 15.5
    assert [t.status for t in trials] == [JobStatus.COMPLETED] * 2 + [
        JobStatus.STOPPED,
        JobStatus.STOPPED,
        JobStatus.STOPPED,
    ]
    assert trials[3].end_time == 15.5 and trials[3].resource == 2
    assert trials[4].end_time == 15.5 and trials[4].resource is None  # still starting up
    assert "max_runtime_seconds=15.5" in (trials[3].failure_reason or "")


def test_a_failing_trial_fails_with_its_reason_and_the_tuning_goes_on(store: Store) -> None:
    source = SequenceSource([0.5, 0.8, 0.3, 0.9, 0.6, 0.4], fail_at=1)
    record = simulate_tuning(_spec(strategy="Random", hyperband=None), source, store)
    trials = store.trials.rows(record.id)
    assert trials[1].status is JobStatus.FAILED
    assert trials[1].failure_reason == "worker 1 failed: OOM"
    assert trials[1].end_time == 4.0  # its curve ends at its second report
    assert [t.status for t in trials].count(JobStatus.COMPLETED) == 5
    assert record.best_objective == 0.9


def test_too_many_failed_trials_fail_the_tuning_job_with_the_reason(store: Store) -> None:
    source = SequenceSource([0.5] * 6, fail_all=True)
    spec = _spec(strategy="Random", hyperband=None, max_failed_trials=3)
    record = simulate_tuning(spec, source, store)
    assert record.status is JobStatus.FAILED
    assert record.failure_reason == "max_failed_trials=3 reached (the last: worker 1 failed: OOM)"
    trials = store.trials.rows(record.id)
    assert 3 <= len(trials) < 6  # no new trial after the third failure
    assert [t.status for t in trials].count(JobStatus.FAILED) == 3
    for trial in trials:  # one that was running then is stopped, with the reason
        if trial.status is not JobStatus.FAILED:
            assert trial.status is JobStatus.STOPPED
            assert trial.failure_reason == "the tuning job failed: too many of its trials failed"


def test_more_workers_than_the_simulated_cluster_has_is_refused(store: Store) -> None:
    with pytest.raises(InvalidInputError, match="needs 4 workers at once; the simulated cluster"):
        simulate_tuning(_spec(), SequenceSource([0.5] * 6), store, capacity_workers=3)


def test_cluster_costs_add_start_up_and_divide_step_time_among_workers() -> None:
    costs = ClusterCosts(start_seconds=5.0, scaling_efficiency=0.5)
    assert costs.arrival_seconds([3.0, 6.0, 6.0], 1) == [8.0, 11.0, 11.001]
    assert costs.arrival_seconds([3.0, 6.0], 3) == [6.5, 8.0]
    with pytest.raises(InvalidInputError, match="scaling_efficiency must be within"):
        ClusterCosts(scaling_efficiency=1.5)


@pytest.mark.parametrize("released_after", [5.0, None], ids=["released", "never"])
def test_a_held_trial_waits_for_its_release_or_goes_on_after_a_real_programs_wait(
    store: Store, released_after: float | None
) -> None:
    """A trial whose verdict at step 3 is held (synchronous PBT: others are not there yet)
    reports nothing more until it is released, then goes on, later by the wait. Never
    released, it goes on after VERDICT_WAIT_SECONDS, as a real trial's program does."""
    clock = SimulatedClock(0.0)
    runner = SimulatedTrialRunner(store, SequenceSource([0.5]), clock)
    spec = _spec().trial_spec({"x": 0.5})
    runner.prepare(spec, job_id="held", tuning_job_id="t", trial_number=0)
    stopper, times = Stopper(), {}

    def on_report(report: Report) -> None:
        times[report.step] = clock.monotonic()
        if report.step == 3:
            stopper.verdicts.hold(3)

    runner.start(0, stopper, on_report)
    while 3 not in times:
        runner.wait(1.0)
    if released_after is not None:
        clock.advance_to(times[3] + released_after)
        stopper.verdicts.release(3)
    while runner.running:
        runner.wait(1.0)
    step_seconds = 2.0 / 2  # the curve's 2 s a step, on the spec's 2 workers
    waited = released_after if released_after is not None else VERDICT_WAIT_SECONDS
    assert times[4] - times[3] == pytest.approx(step_seconds + waited)
    assert times[5] - times[4] == pytest.approx(step_seconds)
    assert store.get_training_job("held").status is JobStatus.COMPLETED
