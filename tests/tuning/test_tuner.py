"""The Tuner loop with real 2-worker XGBoost trials on the bundled data."""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable
from typing import Any

import pytest

from scaletune.analysis import analytics_dataframe, summarize
from scaletune.api import Session
from scaletune.cluster import Group
from scaletune.spec import CapacityPlan, TrainingJobSpec, TuningJobSpec, tuning_spec_from_dict
from scaletune.store import JobStatus, NoticeRecord, TrainingJobRecord
from scaletune.training import PreparedJob, Stopper, TrainingController
from scaletune.tuning import TuningController, TuningProgress
from scaletune.worker import Report
from tests.cluster import programs
from tests.training.test_controller import _ProgramOverride


def _spec(**changes: Any) -> TuningJobSpec:
    return tuning_spec_from_dict(_spec_dict(**changes))


def _spec_dict(**changes: Any) -> dict[str, Any]:
    channel = {"dataset": "breast-cancer"}
    raw: dict[str, Any] = {
        "objective_metric": "validation:logloss",
        "objective_type": "Minimize",
        "strategy": "Hyperband",
        "hyperband": {"min_resource": 1, "max_resource": 27},
        "max_jobs": 8,
        "max_parallel_jobs": 2,
        "seed": 0,
        "ranges": {
            "eta": {"type": "Continuous", "min_value": 0.01, "max_value": 1},
            "max_depth": {"type": "Integer", "min_value": 1, "max_value": 8},
        },
        "training": {
            "algorithm": "xgboost",
            "instance_count": 2,
            "hyperparameters": {"num_round": 27, "eval_metric": "logloss"},
            "channels": {"train": channel, "validation": channel},
        },
    }
    raw.update(changes)
    return raw


def _tune(session: Session, spec: TuningJobSpec, controller: TrainingController | None = None):
    tuner = TuningController(controller or session.controller)
    tuning_id = tuner.create(spec)
    tuner.run(tuning_id, spec)
    return summarize(session.store, tuning_id)


def test_hyperband_tuning_runs_every_trial_once_and_stops_poor_ones(session: Session) -> None:
    summary = _tune(session, _spec())
    assert summary.record.status is JobStatus.COMPLETED
    trials = session.store.training_jobs_of(summary.record.id)
    assert [t.trial_number for t in trials] == list(range(8))
    assert len({t.id for t in trials}) == 8
    assert all(t.status in (JobStatus.COMPLETED, JobStatus.STOPPED) for t in trials)
    stopped = [t for t in trials if t.status is JobStatus.STOPPED]
    assert stopped, "with seed 0, Hyperband stops some of the 8 trials"
    for trial in stopped:
        assert (trial.failure_reason or "").startswith("bracket ")
        assert trial.resource is not None and trial.resource < 27
        assert trial.artifact is not None  # stopped when asked, at a round, with its model
    for trial in trials:
        if trial.status is JobStatus.COMPLETED:
            assert trial.resource == 27
            assert trial.artifact is not None  # it ended by itself, model and all
    objectives = [t.objective for t in trials if t.objective is not None]
    assert summary.record.best_objective == min(objectives)
    assert summary.best is not None and summary.best.objective == min(objectives)
    assert summary.billable_seconds == pytest.approx(sum(t.billable_seconds or 0 for t in trials))
    assert summary.billable_seconds_without_early_stopping >= summary.billable_seconds
    # The trials' wall times end to end (whether parallel trials beat that depends on the
    # machine's load: a comparison with the tuning job's wall time would be flaky).
    assert summary.sequential_wall_seconds == pytest.approx(
        sum(t.wall_seconds or 0 for t in trials)
    )
    as_json = summary.to_json_dict()
    for key in (
        "id",
        "status",
        "strategy",
        "best_training_job",
        "best_objective",
        "job_counts",
        "billable_seconds",
        "billable_seconds_without_early_stopping",
        "wall_seconds",
        "sequential_wall_seconds",
    ):
        assert key in as_json
    assert sum(as_json["job_counts"].values()) == 8


def test_the_same_seed_proposes_the_same_trials(session: Session) -> None:
    spec = _spec(max_jobs=3, max_parallel_jobs=1, strategy="Random", hyperband=None)
    first, second = _tune(session, spec), _tune(session, spec)
    assert [t.hyperparameters for t in session.store.trials.rows(first.record.id)] == [
        t.hyperparameters for t in session.store.trials.rows(second.record.id)
    ]


class _FailTrialOne(TrainingController):
    def prepare(self, spec: TrainingJobSpec, **kwargs: Any) -> PreparedJob:
        job = super().prepare(spec, **kwargs)
        if kwargs.get("trial_number") == 1:
            job = dataclasses.replace(job, algorithm=_ProgramOverride(programs.raise_on_rank_one))
        return job


def test_a_failed_trial_is_recorded_and_the_tuning_goes_on(session: Session) -> None:
    controller = _FailTrialOne(session.store, session.backend, session.location.jobs_dir)
    spec = _spec(max_jobs=4, strategy="Bayesian", hyperband=None)
    summary = _tune(session, spec, controller)
    assert summary.record.status is JobStatus.COMPLETED
    statuses = [t.status for t in session.store.trials.rows(summary.record.id)]
    assert statuses[1] is JobStatus.FAILED
    assert (
        session.store.trials.rows(summary.record.id)[1].failure_reason
        == "worker 1 failed: ValueError: bad shard on rank 1"
    )
    assert statuses.count(JobStatus.COMPLETED) == 3
    assert summary.record.best_training_job != session.store.trials.rows(summary.record.id)[1].id


def test_reaching_the_target_starts_no_more_trials(session: Session) -> None:
    spec = _spec(
        max_jobs=8, max_parallel_jobs=1, strategy="Random", hyperband=None, target_objective=10.0
    )  # any logloss reaches it
    summary = _tune(session, spec)
    assert len(session.store.trials.rows(summary.record.id)) == 1
    assert summary.record.status is JobStatus.COMPLETED


def test_a_stop_request_stops_running_trials(session: Session) -> None:
    spec = _spec(max_jobs=4, max_parallel_jobs=2, strategy="Random", hyperband=None)
    spec = spec.model_copy(
        update={
            "training": spec.training.model_copy(
                update={"hyperparameters": {"num_round": 100_000, "eval_metric": "logloss"}}
            )
        }
    )
    tuner = TuningController(session.controller, poll_seconds=0.05)
    tuning_id = tuner.create(spec)
    session.store.request_tuning_stop(tuning_id)  # as `scaletune tuning stop` would
    tuner.run(tuning_id, spec)
    summary = summarize(session.store, tuning_id)
    assert summary.record.status is JobStatus.STOPPED
    assert summary.record.failure_reason == "stop requested"
    assert (
        len(session.store.trials.rows(summary.record.id)) == 2
    )  # the first two had started; no more did
    assert all(
        t.status is JobStatus.STOPPED for t in session.store.trials.rows(summary.record.id)
    ), [(t.status, t.failure_reason) for t in session.store.trials.rows(summary.record.id)]


def test_analytics_has_a_row_per_job_with_the_reference_columns(session: Session) -> None:
    summary = _tune(session, _spec(max_jobs=3, max_parallel_jobs=3))
    frame = analytics_dataframe(session.store, summary.record.id)
    assert len(frame) == 3
    for column in (
        "eta",
        "max_depth",
        "TrainingJobName",
        "TrainingJobStatus",
        "FinalObjectiveValue",
        "TrainingStartTime",
        "TrainingEndTime",
        "TrainingElapsedTimeSeconds",
        "InstanceCount",
        "BillableSeconds",
        "ResourceReached",
        "StopReason",
    ):
        assert column in frame.columns
    assert set(frame["TrainingJobName"]) == {
        t.id for t in session.store.trials.rows(summary.record.id)
    }


def test_cluster_size_as_a_tuned_choice(session: Session) -> None:
    spec = _spec(
        strategy="Random",
        hyperband=None,
        max_jobs=4,
        max_parallel_jobs=2,
        seed=2,
        ranges={
            "instance_count": {"type": "Categorical", "values": [1, 2]},
            "eta": {"type": "Continuous", "min_value": 0.05, "max_value": 0.5},
        },
    )
    summary = _tune(session, spec)
    sizes = {t.instance_count for t in session.store.trials.rows(summary.record.id)}
    assert sizes == {1, 2}, "seed 2 draws both sizes in 4 trials"
    for trial in session.store.trials.rows(summary.record.id):
        assert "instance_count" not in trial.hyperparameters
        assert trial.billable_seconds == pytest.approx(
            trial.instance_count * (trial.wall_seconds or 0)
        )
    frame = analytics_dataframe(session.store, summary.record.id)
    assert list(frame["instance_count"]) == list(frame["InstanceCount"])


def test_warm_start_from_a_parent_tuning_job(session: Session) -> None:
    parent = _tune(
        session, _spec(strategy="Random", hyperband=None, max_jobs=3, max_parallel_jobs=3, seed=5)
    )
    child_spec = _spec(
        strategy="Bayesian",
        hyperband=None,
        max_jobs=2,
        max_parallel_jobs=2,
        warm_start={"parents": [parent.record.id]},
    )
    tuner = TuningController(session.controller)
    child_id = tuner.create(child_spec)
    tuner.run(child_id, child_spec)
    child = summarize(session.store, child_id)
    assert child.record.status is JobStatus.COMPLETED
    assert [t.trial_number for t in session.store.trials.rows(child.record.id)] == [
        0,
        1,
    ]  # its own numbering
    assert child.record.best_training_job is not None
    assert child.record.best_training_job.startswith(child_id)  # best of its own trials


@pytest.mark.parametrize(
    ("parents", "expected"),
    [
        (["no-such-tuning-job"], "no tuning job with id 'no-such-tuning-job'"),
        (["UNFINISHED"], "has not ended (Pending)"),
        (["OTHER-OBJECTIVE"], "optimised Maximize validation:auc, not Minimize validation:logloss"),
    ],
)
def test_bad_warm_start_parents_are_refused(
    session: Session, parents: list[str], expected: str
) -> None:
    from scaletune.errors import InvalidInputError

    tuner = TuningController(session.controller)
    names = {"UNFINISHED": tuner.create(_spec())}
    channel = {"dataset": "breast-cancer"}
    other = _spec(
        objective_metric="validation:auc",
        objective_type="Maximize",
        training={
            "algorithm": "xgboost",
            "instance_count": 2,
            "hyperparameters": {"num_round": 27, "eval_metric": "auc"},
            "channels": {"train": channel, "validation": channel},
        },
    )
    names["OTHER-OBJECTIVE"] = tuner.create(other)
    session.store.finish_tuning_job(names["OTHER-OBJECTIVE"], JobStatus.COMPLETED, 1.0, 1.0)
    spec = _spec(warm_start={"parents": [names.get(p, p) for p in parents]})
    with pytest.raises(InvalidInputError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        tuner.create(spec)


def test_progress_counts_trials_by_outcome(session: Session) -> None:
    seen: list[TuningProgress] = []
    spec = _spec(max_jobs=3, max_parallel_jobs=2)
    tuner = TuningController(session.controller, on_progress=seen.append)
    tuning_id = tuner.create(spec)
    tuner.run(tuning_id, spec)
    assert seen[0].running == 2  # the first two started at once
    last = seen[-1]
    statuses = [t.status for t in session.store.trials.rows(tuning_id)]
    ended_before_last = last.completed + last.stopped + last.failed
    assert ended_before_last + last.running == 3
    assert last.completed <= statuses.count(JobStatus.COMPLETED)
    assert last.stopped <= statuses.count(JobStatus.STOPPED)


def test_promotion_pauses_trials_and_resumes_them_from_their_checkpoints(
    session: Session,
) -> None:
    """Real 2-worker trials: one that does not rank at a rung pauses (checkpoint kept, workers
    freed) and, once it ranks, goes on as the same job from where it paused."""
    spec = _spec(
        hyperband={
            "max_resource": 27,
            "type": "promotion",
            "brackets": 1,
            "rank_by": "value",
            "placement": "rungs",  # spot until promoted, then on-demand
        },
        max_jobs=10,
        max_parallel_jobs=1,  # one at a time: reports reach the scheduler in a fixed order
        seed=4,
    )
    summary = _tune(session, spec)
    assert summary.record.status is JobStatus.COMPLETED
    assert summary.job_counts["Paused"] == 0  # those never promoted end Stopped
    trials = session.store.training_jobs_of(summary.record.id)
    assert [t.trial_number for t in trials] == list(range(10))
    promoted = []
    for trial in trials:
        attempts = session.store.attempts.of(trial.id)
        assert [a.status for a in attempts[:-1]] == [JobStatus.PAUSED] * (len(attempts) - 1)
        steps = [p.step for p in session.store.metrics(trial.id, "validation:logloss")]
        assert steps == list(range(1, (trial.resource or 0) + 1))  # each step once, in order
        if len(attempts) > 1:
            promoted.append(trial)
            for later in attempts[1:]:  # from the checkpoint its pause saved, at a rung or past
                assert later.resumed_from_step is not None and later.resumed_from_step >= 1
            assert trial.start_time is not None and trial.end_time is not None
            assert trial.wall_seconds is not None
            # Billed for the time its workers ran, not for its pauses: on spot until its
            # promotion, on on-demand capacity after.
            assert trial.wall_seconds < trial.end_time - trial.start_time
            assert trial.billable_seconds == pytest.approx(2 * trial.wall_seconds)
            assert set(trial.billable_by_class or {}) == {"spot", "on-demand"}
        else:
            assert set(trial.billable_by_class or {}) == {"spot"}  # never promoted
        if trial.status is JobStatus.STOPPED:
            assert (trial.failure_reason or "").endswith(
                "paused until it is; not promoted before the tuning job ended"
            )
    assert promoted, "with seed 4, a paused trial ranks later and is promoted"
    frame = analytics_dataframe(session.store, summary.record.id)
    assert set(frame["HyperbandBracket"]) == {0}
    reached = dict(zip(frame["TrainingJobName"], frame["RungsReached"], strict=True))
    for trial in trials:
        rungs = [r for r in (1, 3, 9) if (trial.resource or 0) >= r]
        assert reached[trial.id] == " ".join(map(str, rungs))


class _ReportThreadShare(TrainingController):
    def prepare(self, spec: TrainingJobSpec, **kwargs: Any) -> PreparedJob:
        job = super().prepare(spec, **kwargs)
        program = _ProgramOverride(programs.report_thread_share, tracker=False)
        return dataclasses.replace(job, algorithm=program)


def test_parallel_trials_share_the_cores_instead_of_each_taking_every_core(
    session: Session,
) -> None:
    controller = _ReportThreadShare(session.store, session.backend, session.location.jobs_dir)
    spec = _spec(max_jobs=3, max_parallel_jobs=2, strategy="Random", hyperband=None)
    summary = _tune(session, spec, controller)
    cores = os.cpu_count() or 1
    trials = session.store.trials.rows(summary.record.id)
    assert [t.status for t in trials] == [JobStatus.COMPLETED] * 3
    for trial in trials:  # 2 trials at once, 2 workers each
        assert [p.value for p in session.store.metrics(trial.id, "concurrent_workers")] == [4]
        assert [p.value for p in session.store.metrics(trial.id, "threads")] == [max(1, cores // 4)]
    alone = controller.run(controller.prepare(spec.training))  # a job of its own
    assert [p.value for p in session.store.metrics(alone.id, "concurrent_workers")] == [0]
    assert [p.value for p in session.store.metrics(alone.id, "threads")] == [max(1, cores // 2)]


class _CountStepsNoticedOnce(TrainingController):
    """Trials that count steps; trial 0's worker 1 gets a preemption notice at its 5th."""

    noticed = False

    def prepare(self, spec: TrainingJobSpec, **kwargs: Any) -> PreparedJob:
        return self._counting(super().prepare(spec, **kwargs))

    def prepare_resume(self, job_id: str, *, capacity: CapacityPlan | None = None) -> PreparedJob:
        return self._counting(super().prepare_resume(job_id, capacity=capacity))

    def _counting(self, job: PreparedJob) -> PreparedJob:
        program = _ProgramOverride(programs.count_steps, tracker=False)
        return dataclasses.replace(job, algorithm=program)

    def run(
        self,
        job: PreparedJob,
        stop: Stopper | None = None,
        on_started: Callable[[Group], None] | None = None,
        on_report: Callable[[Report], None] | None = None,
    ) -> TrainingJobRecord:
        def report(event: Report) -> None:
            if job.id.endswith("-000") and event.step == 5 and not self.noticed:
                self.noticed = True  # as `jobs notice ID --worker 1` gives it
                notice = NoticeRecord(1, 1, 30.0, "jobs notice", time.time())
                self.store.notices.give(job.id, notice)
            if on_report is not None:
                on_report(event)

        return super().run(job, stop, on_started, report)


def test_a_trial_given_a_notice_pauses_at_a_checkpoint_and_is_resumed_first(
    session: Session,
) -> None:
    controller = _CountStepsNoticedOnce(session.store, session.backend, session.location.jobs_dir)
    spec = _spec(
        max_jobs=2,
        max_parallel_jobs=1,
        strategy="Random",
        hyperband=None,
        training={**_spec_dict()["training"], "retry": {"max_attempts": 0}},
    )
    summary = _tune(session, spec, controller)

    assert summary.record.status is JobStatus.COMPLETED
    first, second = session.store.training_jobs_of(summary.record.id)
    assert (first.status, second.status) == (JobStatus.COMPLETED,) * 2, first.failure_reason
    attempts = session.store.attempts.of(first.id)
    assert [a.status for a in attempts] == [JobStatus.PAUSED, JobStatus.COMPLETED]
    assert attempts[0].reason == (
        "worker 1 got a preemption notice (jobs notice, 30 s): paused at a checkpoint, to be "
        "resumed first"
    )
    assert attempts[1].steps_redone == 0
    steps = [p.step for p in session.store.metrics(first.id, "validation:logloss")]
    assert steps == list(range(1, programs.COUNTED_STEPS + 1))
    # Resumed before the next trial started, though the scheduler never paused it.
    assert second.start_time is not None and attempts[1].start_time < second.start_time


def test_a_trial_stopped_by_the_scheduler_is_marked_stopped_early(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Trackers show such a trial as finished (it ran as asked, for less), not killed."""
    from scaletune.simulation._runner import SimulatedTrialRunner
    from scaletune.store import Store
    from tests.simulated import simulated_tuning

    stoppers: dict[int, Stopper] = {}
    start = SimulatedTrialRunner.start

    def remembered(runner: SimulatedTrialRunner, number: int, stopper: Stopper, *rest: Any) -> None:
        stoppers[number] = stopper
        start(runner, number, stopper, *rest)

    monkeypatch.setattr(SimulatedTrialRunner, "start", remembered)
    with Store(f"sqlite:///{tmp_path / 'store.db'}") as store:
        record = simulated_tuning(store, 12)
        trials = {t.trial_number or 0: t for t in store.training_jobs_of(record.id)}
    stopped = [n for n, t in trials.items() if t.status is JobStatus.STOPPED]
    assert stopped  # Hyperband on values stops the worse at rungs 1 and 3
    for number, trial in trials.items():
        early = stoppers[number].early and stoppers[number].status is JobStatus.STOPPED
        assert early is (trial.status is JobStatus.STOPPED), (number, trial.failure_reason)
