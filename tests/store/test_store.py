"""One suite, run against SQLite and (when a server is given) PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import create_engine, text, update
from sqlalchemy.exc import IntegrityError

from scaletune.errors import InvalidInputError, JobNotFoundError, StoreError
from scaletune.store import (
    JobOutcome,
    JobStatus,
    MetricPoint,
    NewTrainingJob,
    NewTuningJob,
    NoticeRecord,
    RejectedMetric,
    Store,
    resolve_store,
)
from scaletune.store._schema import meta


def _new(job_id: str, created_at: float = 100.0) -> NewTrainingJob:
    return NewTrainingJob(
        id=job_id,
        name=None,
        algorithm="xgboost",
        spec={"algorithm": "xgboost"},
        hyperparameters={"eta": 0.3},
        instance_count=3,
        created_at=created_at,
        log_dir="/logs",
    )


def test_a_job_goes_from_pending_to_completed(store: Store) -> None:
    store.create_training_job(_new("job-1"))
    assert store.get_training_job("job-1").status is JobStatus.PENDING
    store.mark_in_progress("job-1", 101.0, pid=42, host="here")
    running = store.get_training_job("job-1")
    assert (running.status, running.controller_pid, running.start_time) == (
        JobStatus.IN_PROGRESS,
        42,
        101.0,
    )
    store.finish_training_job(
        "job-1",
        JobOutcome(
            status=JobStatus.COMPLETED,
            start_time=101.0,
            end_time=111.0,
            wall_seconds=10.0,
            billable_seconds=30.0,
            final_metrics={"validation:auc": 0.78},
            artifact="/m",
        ),
    )
    done = store.get_training_job("job-1")
    assert done.status is JobStatus.COMPLETED
    assert done.billable_seconds == 30.0
    assert done.final_metrics == {"validation:auc": 0.78}
    assert done.hyperparameters == {"eta": 0.3}
    as_json = done.to_json_dict()
    for key in (
        "id",
        "status",
        "algorithm",
        "instance_count",
        "hyperparameters",
        "start_time",
        "end_time",
        "wall_seconds",
        "billable_seconds",
        "final_metrics",
        "failure_reason",
        "artifact",
    ):
        assert key in as_json
    assert as_json["status"] == "Completed"
    assert as_json["start_time"].startswith("1970-01-01T00:01:41")


def test_listing_is_newest_first_and_filters(store: Store) -> None:
    for index in range(3):
        store.create_training_job(_new(f"job-{index}", created_at=100.0 + index))
    store.mark_in_progress("job-1", 1.0, pid=1, host="h")
    assert [job.id for job in store.list_training_jobs()] == ["job-2", "job-1", "job-0"]
    assert [job.id for job in store.list_training_jobs(limit=1)] == ["job-2"]
    assert [job.id for job in store.list_training_jobs(status=JobStatus.IN_PROGRESS)] == ["job-1"]


def test_metrics_come_back_ordered_and_filtered(store: Store) -> None:
    store.create_training_job(_new("job-1"))
    store.append_metrics(
        "job-1",
        [
            MetricPoint("validation:auc", 2, 0.7, 2.0),
            MetricPoint("validation:auc", 1, 0.6, 1.0),
            MetricPoint("train:auc", 1, 0.9, 1.0),
        ],
    )
    assert [(p.name, p.step) for p in store.metrics("job-1")] == [
        ("train:auc", 1),
        ("validation:auc", 1),
        ("validation:auc", 2),
    ]
    assert [p.value for p in store.metrics("job-1", "validation:auc")] == [0.6, 0.7]


def test_a_failed_batch_writes_nothing(store: Store) -> None:
    store.create_training_job(_new("job-1"))
    with pytest.raises(IntegrityError):
        store.append_metrics(
            "job-1",
            [
                MetricPoint("a", 1, 0.5, 1.0),
                MetricPoint("a", 2, None, 2.0),  # type: ignore[arg-type]
            ],
        )
    assert store.metrics("job-1") == []


def test_stop_requests(store: Store) -> None:
    store.create_training_job(_new("job-1"))
    assert not store.is_stop_requested("job-1")
    assert store.request_stop("job-1").stop_requested
    assert store.is_stop_requested("job-1")
    with pytest.raises(JobNotFoundError, match="'nope'"):
        store.request_stop("nope")
    with pytest.raises(JobNotFoundError):
        store.get_training_job("nope")


def test_abandoning_leaves_ended_jobs_alone(store: Store) -> None:
    store.create_training_job(_new("running"))
    store.create_training_job(_new("ended"))
    store.finish_training_job("ended", JobOutcome(JobStatus.COMPLETED, 1.0, 2.0, 1.0, 3.0, {}))
    for job_id in ("running", "ended"):
        store.abandon_training_job(job_id, JobStatus.FAILED, "controller gone", 5.0)
    assert store.get_training_job("running").status is JobStatus.FAILED
    assert store.get_training_job("running").failure_reason == "controller gone"
    assert store.get_training_job("ended").status is JobStatus.COMPLETED


def test_an_ending_and_its_last_reports_are_written_together(store: Store) -> None:
    # One statement on PostgreSQL (a data-modifying WITH), one transaction on SQLite.
    store.create_training_job(_new("job-1"))
    store.append_metrics("job-1", [MetricPoint("loss", 1, 0.5, 1.0)])
    last = [MetricPoint("loss", 2, 0.25, 2.0), MetricPoint("acc", 2, 0.75, 2.0)]
    outcome = JobOutcome(
        JobStatus.STOPPED,
        1.0,
        2.0,
        1.0,
        3.0,
        {"loss": 0.25},
        failure_reason="stopped early",
        billable_by_class={"spot": 3.0},
    )
    store.finish_training_job("job-1", outcome, last)
    record = store.get_training_job("job-1")
    assert (record.status, record.failure_reason) == (JobStatus.STOPPED, "stopped early")
    assert record.final_metrics == {"loss": 0.25} and record.billable_by_class == {"spot": 3.0}
    assert [(p.name, p.step, p.value) for p in store.metrics("job-1", "loss")] == [
        ("loss", 1, 0.5),
        ("loss", 2, 0.25),
    ]
    assert [(p.step, p.value, p.time) for p in store.metrics("job-1", "acc")] == [(2, 0.75, 2.0)]


def test_finishing_needs_a_final_status(store: Store) -> None:
    store.create_training_job(_new("job-1"))
    with pytest.raises(ValueError, match="not a final status"):
        store.finish_training_job("job-1", JobOutcome(JobStatus.IN_PROGRESS, 1, 2, 1, 3, {}))


def test_reopening_keeps_data_and_checks_the_schema_version(store_url: str) -> None:
    with Store(store_url) as first:
        first.create_training_job(_new("job-1"))
    with Store(store_url) as second:
        assert second.get_training_job("job-1").id == "job-1"
    engine = create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    with engine.begin() as conn:
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="999"))
    engine.dispose()
    with pytest.raises(StoreError, match="schema version 999"):
        Store(store_url)


@pytest.mark.parametrize(
    "url", ["mysql://x/y", "not a url at all://", "sqlite:////nonexistent-dir/x/y.db"]
)
def test_bad_store_urls(url: str) -> None:
    with pytest.raises(StoreError):
        Store(url)


def test_store_locations(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SCALETUNE_STORE", raising=False)
    monkeypatch.setenv("SCALETUNE_HOME", str(tmp_path / "home"))
    default = resolve_store()
    assert default.url == f"sqlite:///{tmp_path / 'home' / 'scaletune.db'}"
    assert default.jobs_dir == tmp_path / "home" / "jobs"
    file = resolve_store(tmp_path / "elsewhere" / "my.db")
    assert file.home == tmp_path / "elsewhere"
    monkeypatch.setenv("SCALETUNE_STORE", "postgresql://u@localhost/db")
    from_env = resolve_store()
    assert (from_env.url, from_env.home) == ("postgresql://u@localhost/db", tmp_path / "home")


def test_a_version_1_store_is_migrated_in_place(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'old.db'}"
    with Store(url) as store:
        store.create_training_job(_new("old-job"))
    engine = create_engine(url)
    with engine.begin() as conn:  # make it look as version 1 left it
        for index in (
            "tuning_job_id",
            "tuning_trial",
            "tuning_status",
            "tuning_created",
            "tuning_pace",
            "tuning_objective_high",
            "tuning_objective_low",
        ):
            conn.execute(text(f"DROP INDEX ix_training_jobs_{index}"))
        for column in (
            "tuning_job_id",
            "trial_number",
            "objective",
            "resource",
            "waiting_since",
            "full_resource",
            "seconds_per_step",
            "hyperband_bracket",
            "requested_size",
        ):
            conn.execute(text(f"ALTER TABLE training_jobs DROP COLUMN {column}"))
        conn.execute(text("DROP TABLE tuning_jobs"))
        conn.execute(text("DROP TABLE rejected_metrics"))
        conn.execute(text("DROP TABLE job_attempts"))
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="1"))
    engine.dispose()
    with Store(url) as store:
        assert store.get_training_job("old-job").tuning_job_id is None
        assert "ix_training_jobs_tuning_job_id" in _index_names(url)
        store.set_trial_result("old-job", 0.5, 3)
        assert store.get_training_job("old-job").objective == 0.5
        assert store.list_tuning_jobs() == []
        assert store.rejected("old-job") == []  # and what version 3 added
        store.set_waiting("old-job", 12.5)  # and version 4's column
        assert store.get_training_job("old-job").waiting_since == 12.5
        store.request_size("old-job", 3)  # and version 10's
        assert store.requested_size("old-job") == 3
        store.attempts.start("old-job", 1, 20.0)  # and version 5's table
        store.attempts.set_workers("old-job", 1, ["here pid 1", "here pid 2"])  # and version 8's
        assert [(a.number, a.workers) for a in store.attempts.of("old-job")] == [
            (1, ("here pid 1", "here pid 2"))
        ]
        store.set_trial_result("old-job", 0.5, 3, seconds_per_step=2.0, full_resource=9, bracket=1)
        with create_engine(url).connect() as conn:  # and version 6's and 7's columns
            assert conn.execute(
                text("SELECT seconds_per_step, full_resource, hyperband_bracket FROM training_jobs")
            ).all() == [(2.0, 9, 1)]
        assert {
            "ix_training_jobs_tuning_trial",
            "ix_training_jobs_tuning_status",
            "ix_training_jobs_tuning_objective_high",
        } <= _index_names(url)


def test_a_version_7_store_gains_where_each_attempts_workers_ran(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v7.db'}"
    with Store(url) as store:
        store.create_training_job(_new("old-job"))
        store.attempts.start("old-job", 1, 20.0)
    engine = create_engine(url)
    with engine.begin() as conn:  # as version 7 left it: attempts without their workers
        conn.execute(text("ALTER TABLE job_attempts DROP COLUMN workers"))
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="7"))
    engine.dispose()
    with Store(url) as store:
        (old,) = store.attempts.of("old-job")
        assert old.workers == ()  # recorded before version 8: nowhere known
        store.attempts.set_workers("old-job", 1, ["10.0.0.7 node 1a2b3c4d"])
        (placed,) = store.attempts.of("old-job")
        assert placed.workers == ("10.0.0.7 node 1a2b3c4d",)
        assert placed.to_json_dict()["workers"] == ["10.0.0.7 node 1a2b3c4d"]


def _index_names(url: str) -> set[str]:
    """Read off SQLite's catalogue: SQLAlchemy's reflection skips indexes over expressions."""
    engine = create_engine(url)
    with engine.connect() as conn:
        names = set(conn.scalars(text("SELECT name FROM sqlite_master WHERE type = 'index'")))
    engine.dispose()
    return names


def test_a_version_8_store_gains_the_indexes_trial_pages_by_objective_read(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'v8.db'}"
    with Store(url) as store:
        store.create_training_job(_new("old-job"))
    engine = create_engine(url)
    with engine.begin() as conn:  # as version 8 left it
        for direction in ("high", "low"):
            conn.execute(text(f"DROP INDEX ix_training_jobs_tuning_objective_{direction}"))
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="8"))
    engine.dispose()
    with Store(url) as store:
        assert store.get_training_job("old-job").id == "old-job"
    assert {
        "ix_training_jobs_tuning_objective_high",
        "ix_training_jobs_tuning_objective_low",
    } <= _index_names(url)


def test_a_version_10_store_gains_tuning_job_leases(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v10.db'}"
    with Store(url) as store:
        store.create_tuning_job(
            NewTuningJob(id="old-tuning", name=None, strategy="Random", spec={}, created_at=1.0)
        )
    engine = create_engine(url)
    with engine.begin() as conn:  # as version 10 left it
        for column in ("lease_holder", "lease_expires"):
            conn.execute(text(f"ALTER TABLE tuning_jobs DROP COLUMN {column}"))
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="10"))
    engine.dispose()
    with Store(url) as store:
        assert store.get_tuning_job("old-tuning").lease_holder is None
        assert store.take_tuning_lease("old-tuning", "me", 5.0, 65.0) is None
        taken = store.take_tuning_lease("old-tuning", "another", 6.0, 66.0)
        assert taken is not None and taken.lease_holder == "me" and taken.lease_expires == 65.0
        assert store.take_tuning_lease("old-tuning", "another", 66.0, 126.0) is None  # lapsed
        assert not store.renew_tuning_lease("old-tuning", "me", 130.0)


def test_a_version_13_store_gains_why_a_tuning_job_completed(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'v13.db'}"
    with Store(url) as store:
        store.create_tuning_job(
            NewTuningJob(id="old-tuning", name=None, strategy="Random", spec={}, created_at=1.0)
        )
    engine = create_engine(url)
    with engine.begin() as conn:  # as version 13 left it
        conn.execute(text("ALTER TABLE tuning_jobs DROP COLUMN completion_reason"))
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="13"))
    engine.dispose()
    with Store(url) as store:
        assert store.get_tuning_job("old-tuning").completion_reason is None  # not kept then
        store.finish_tuning_job(
            "old-tuning", JobStatus.COMPLETED, 2.0, 1.0, completion_reason="max_jobs=3 reached"
        )
        assert store.get_tuning_job("old-tuning").completion_reason == "max_jobs=3 reached"


def test_a_version_11_store_gains_notices_and_billing_by_capacity_class(
    tmp_path: Path,
) -> None:
    url = f"sqlite:///{tmp_path / 'v11.db'}"
    with Store(url) as store:
        store.create_training_job(_new("old-job"))
    engine = create_engine(url)
    with engine.begin() as conn:  # as version 11 left it
        conn.execute(text("ALTER TABLE training_jobs DROP COLUMN billable_by_class"))
        conn.execute(text("DROP TABLE worker_notices"))
        conn.execute(update(meta).where(meta.c.key == "schema_version").values(value="11"))
    engine.dispose()
    with Store(url) as store:
        assert store.get_training_job("old-job").billable_by_class is None  # not kept then
        assert store.notices.of("old-job") == []
        notice = NoticeRecord(1, 2, 30.0, "jobs notice", 5.0)
        store.notices.give("old-job", notice)
        assert store.notices.of("old-job") == [notice]
        store.finish_training_job(
            "old-job",
            JobOutcome(
                JobStatus.COMPLETED,
                1.0,
                2.0,
                1.0,
                3.0,
                {},
                billable_by_class={"on-demand": 1.0, "spot": 2.0},
            ),
        )
        assert store.get_training_job("old-job").billable_by_class == {
            "on-demand": 1.0,
            "spot": 2.0,
        }


def test_attempts_are_recorded_and_a_dead_controllers_attempt_ends_with_its_job(
    store_url: str,
) -> None:
    with Store(store_url) as store:
        store.create_training_job(_new("job-1"))
        store.attempts.start("job-1", 1, 10.0)
        store.attempts.set_checkpoint("job-1", 1, 40)
        store.attempts.end(
            "job-1", 1, status=JobStatus.FAILED, end_time=11.0, reason="killed", retried=True
        )
        store.attempts.start("job-1", 2, 12.0, resumed_from_step=40, steps_redone=3)
        store.mark_in_progress("job-1", 10.0, 1, "elsewhere")
        store.abandon_training_job("job-1", JobStatus.FAILED, "controller gone", 13.0)
        first, second = store.attempts.of("job-1")
        assert (first.status, first.retried, first.checkpoint_step) == (
            JobStatus.FAILED,
            True,
            40,
        )
        assert (second.resumed_from_step, second.steps_redone, second.checkpoint_step) == (
            40,
            3,
            40,
        )
        assert (second.status, second.reason, second.end_time) == (
            JobStatus.FAILED,
            "controller gone",
            13.0,
        )
        assert second.to_json_dict()["resumed_from_step"] == 40
        with pytest.raises(IntegrityError):  # one row per attempt number
            store.attempts.start("job-1", 2, 14.0)


def test_resuming_reopens_only_an_ended_job_and_forgets_reports_past_the_checkpoint(
    store_url: str,
) -> None:
    with Store(store_url) as store:
        store.create_training_job(_new("job-1"))
        with pytest.raises(InvalidInputError, match="is Pending: only a Stopped, Failed or Paused"):
            store.reopen_training_job("job-1")
        store.append_metrics("job-1", [MetricPoint("loss", step, 1.0, 0.0) for step in (1, 2, 3)])
        store.append_rejected("job-1", [RejectedMetric("loss", 3, "nan", 0.0)])
        store.request_stop("job-1")
        store.abandon_training_job("job-1", JobStatus.STOPPED, "stopped", 5.0)
        store.reopen_training_job("job-1")
        record = store.get_training_job("job-1")
        assert (record.status, record.stop_requested, record.end_time) == (
            JobStatus.PENDING,
            False,
            None,
        )
        assert store.discard_metrics_after("job-1", 1) == 3  # two points and one rejected
        assert [p.step for p in store.metrics("job-1")] == [1]
        assert store.rejected("job-1") == []
        store.discard_metrics_after("job-1", None)
        assert store.metrics("job-1") == []


def test_rejected_values_are_kept_apart_from_metrics(store_url: str) -> None:
    with Store(store_url) as store:
        store.create_training_job(_new("job-1"))
        store.append_rejected("job-1", [RejectedMetric("validation:auc", 2, "nan", 10.0)])
        assert store.rejected("job-1") == [RejectedMetric("validation:auc", 2, "nan", 10.0)]
        assert store.metrics("job-1") == []
