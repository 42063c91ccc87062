"""Reads over a tuning job's trials: the aggregates a summary is made of, pages and curves."""

from __future__ import annotations

import pytest
from sqlalchemy import and_, create_engine, text

from scaletune.store import (
    JobOutcome,
    JobStatus,
    MetricPoint,
    NewTrainingJob,
    NewTuningJob,
    Store,
    TrialOrder,
    TrialSortKey,
)
from scaletune.store._queries import page_of_ids
from scaletune.store._schema import training_jobs


def _tuning(store: Store, tuning_id: str) -> None:
    store.create_tuning_job(NewTuningJob(tuning_id, None, "Hyperband", {}, created_at=1.0))


def _trial(
    store: Store,
    tuning_id: str,
    number: int,
    status: JobStatus,
    *,
    workers: int = 1,
    billable: float | None = None,
    resource: int | None = None,
    full: int | None = None,
    per_step: float | None = None,
) -> str:
    job_id = f"{tuning_id}-{number:03d}"
    store.create_training_job(
        NewTrainingJob(
            id=job_id,
            name=None,
            algorithm="xgboost",
            spec={},
            hyperparameters={"eta": number / 10},
            instance_count=workers,
            created_at=10.0 + number,
            log_dir="",
            tuning_job_id=tuning_id,
            trial_number=number,
        )
    )
    if status is JobStatus.IN_PROGRESS:
        store.mark_in_progress(job_id, 20.0, 1, "here")
    elif status.is_terminal:
        store.finish_training_job(
            job_id,
            JobOutcome(
                status,
                20.0,
                20.0 + (billable or 0) / workers,
                (billable or 0) / workers,
                billable or 0.0,
                {},
            ),
        )
    store.set_trial_result(
        job_id,
        None if resource is None else resource / 10,
        resource,
        seconds_per_step=per_step,
        full_resource=full,
    )
    return job_id


@pytest.fixture
def tuned(store: Store) -> Store:
    _tuning(store, "t")
    _trial(
        store, "t", 0, JobStatus.COMPLETED, workers=2, billable=10, resource=9, full=9, per_step=1.0
    )
    # Stopped at 3 of 27 (capped at max_resource 9): 6 steps more at 0.5 s on 2 workers.
    _trial(
        store, "t", 1, JobStatus.STOPPED, workers=2, billable=4, resource=3, full=27, per_step=0.5
    )
    # Stopped at 1 of 9 with no time per step of its own: the median trial's.
    _trial(store, "t", 2, JobStatus.STOPPED, billable=2, resource=1, full=9)
    _trial(store, "t", 3, JobStatus.FAILED, billable=3, resource=2, full=9, per_step=3.0)
    _trial(store, "t", 4, JobStatus.STOPPED, billable=1)  # stopped before any report
    waiting = _trial(store, "t", 5, JobStatus.IN_PROGRESS)
    store.set_waiting(waiting, 25.0)
    _tuning(store, "other")
    _trial(store, "other", 0, JobStatus.STOPPED, billable=100, resource=1, full=9, per_step=9.0)
    return store


def test_totals_add_up_one_tuning_jobs_trials(tuned: Store) -> None:
    totals = tuned.trials.totals("t", max_resource=9)
    assert totals.trials == 6
    assert totals.job_counts == {
        JobStatus.PENDING: 0,
        JobStatus.IN_PROGRESS: 1,
        JobStatus.COMPLETED: 1,
        JobStatus.FAILED: 1,
        JobStatus.STOPPED: 3,
        JobStatus.PAUSED: 0,
    }
    assert totals.billable_seconds == pytest.approx(10 + 4 + 2 + 3 + 1)
    assert totals.sequential_wall_seconds == pytest.approx(5 + 2 + 2 + 3 + 1)
    # Known seconds per step 1.0, 0.5, 3.0: median 1.0 for trial 2 (8 steps, 1 worker).
    assert totals.unspent_seconds == pytest.approx(6 * 0.5 * 2 + 8 * 1.0 * 1)
    assert totals.waiting_for_room == ["t-005"]


def test_the_estimate_caps_at_max_resource_only_when_there_is_one(tuned: Store) -> None:
    uncapped = tuned.trials.totals("t", max_resource=None)
    assert uncapped.unspent_seconds == pytest.approx(24 * 0.5 * 2 + 8 * 1.0 * 1)


def test_an_even_count_of_known_times_takes_the_mean_of_the_middle_two(tuned: Store) -> None:
    _trial(tuned, "t", 6, JobStatus.COMPLETED, billable=1, resource=9, full=9, per_step=2.0)
    totals = tuned.trials.totals("t", max_resource=9)  # 0.5, 1.0, 2.0, 3.0: median 1.5
    assert totals.unspent_seconds == pytest.approx(6 * 0.5 * 2 + 8 * 1.5 * 1)


def test_a_tuning_job_without_trials_adds_up_to_nothing(store: Store) -> None:
    _tuning(store, "empty")
    totals = store.trials.totals("empty", max_resource=9)
    assert (totals.trials, totals.billable_seconds, totals.unspent_seconds) == (0, 0.0, 0.0)
    assert store.trials.rows("empty") == []
    assert store.trials.curves("empty", "auc") == {}


def test_rows_come_in_trial_order_and_page(tuned: Store) -> None:
    rows = tuned.trials.rows("t")
    assert [row.trial_number for row in rows] == [0, 1, 2, 3, 4, 5]
    assert rows[1].status is JobStatus.STOPPED
    assert (rows[1].full_resource, rows[1].seconds_per_step) == (27, 0.5)
    assert rows[1].hyperparameters == {"eta": 0.1}
    assert [row.trial_number for row in tuned.trials.rows("t", limit=2, offset=3)] == [3, 4]


@pytest.mark.parametrize("key", list(TrialSortKey))
@pytest.mark.parametrize("descending", [False, True], ids=["ascending", "descending"])
def test_every_page_of_a_sort_is_its_slice_of_the_whole_sorted_list(
    tuned: Store, key: TrialSortKey, descending: bool
) -> None:
    """Pages are read by sorting the keys alone, then joining the page's rows: the same order,
    ties and rows with no value (last) included, as sorting every whole row."""
    order = TrialOrder(key, descending)
    whole = [row.trial_number for row in tuned.trials.rows("t", order=order)]
    assert sorted(n or 0 for n in whole) == [0, 1, 2, 3, 4, 5]
    for size in (1, 2, 4):
        pages = [
            [
                row.trial_number
                for row in tuned.trials.rows("t", limit=size, offset=start, order=order)
            ]
            for start in range(0, 7, size)
        ]
        assert [n for page in pages for n in page] == whole
    full_rows = tuned.trials.rows("t", order=order)
    assert tuned.trials.rows("t", limit=3, offset=2, order=order) == full_rows[2:5]


def test_curves_are_one_metric_of_one_tuning_jobs_trials_in_step_order(tuned: Store) -> None:
    tuned.append_metrics(
        "t-000",
        [
            MetricPoint("auc", 2, 0.7, 3.0),
            MetricPoint("loss", 1, 0.9, 1.0),
            MetricPoint("auc", 1, 0.6, 2.0),
        ],
    )
    tuned.append_metrics("t-001", [MetricPoint("auc", 1, 0.5, 2.5)])
    tuned.append_metrics("other-000", [MetricPoint("auc", 1, 0.1, 2.0)])
    curves = tuned.trials.curves("t", "auc")
    assert curves == {
        "t-000": [MetricPoint("auc", 1, 0.6, 2.0), MetricPoint("auc", 2, 0.7, 3.0)],
        "t-001": [MetricPoint("auc", 1, 0.5, 2.5)],
    }
    assert curves["t-000"] == tuned.metrics("t-000", "auc")  # the same as one job's read


def test_jobs_list_pages_and_filters_by_tuning_job(tuned: Store) -> None:
    newest_first = [job.id for job in tuned.list_training_jobs(tuning_job_id="t")]
    assert newest_first == [f"t-{n:03d}" for n in (5, 4, 3, 2, 1, 0)]
    pages = [
        [job.id for job in tuned.list_training_jobs(tuning_job_id="t", limit=4, offset=offset)]
        for offset in (0, 4, 8)
    ]
    assert pages == [newest_first[:4], newest_first[4:], []]
    assert len(tuned.list_training_jobs()) == 7  # both tuning jobs' trials
    stopped = tuned.list_training_jobs(status=JobStatus.STOPPED, tuning_job_id="t", limit=1)
    assert [job.id for job in stopped] == ["t-004"]


@pytest.mark.parametrize("descending", [False, True], ids=["ascending", "descending"])
def test_a_page_by_objective_is_read_off_an_index_in_its_order(
    tuned: Store, store_url: str, descending: bool
) -> None:
    """Deep pages of a large tuning job stay quick only if the database walks an index in the
    page's order instead of sorting every trial (benchmarks/store/scale.py measures it): the
    plan has no sort step, whatever the table's size. PostgreSQL is told sorting costs too
    much, so the plan shows whether an index can give the order at all."""
    of_job = training_jobs.c.tuning_job_id == "t"
    clauses = TrialOrder(TrialSortKey.OBJECTIVE, descending).clauses()
    engine = create_engine(store_url.replace("postgresql://", "postgresql+psycopg://", 1))
    sqlite = engine.dialect.name == "sqlite"
    with engine.connect() as conn:
        if not sqlite:
            conn.execute(text("SET enable_sort = off"))
            conn.execute(text("SET enable_seqscan = off"))
        for where in (of_job, and_(of_job, training_jobs.c.status.in_(["Completed", "Stopped"]))):
            query = page_of_ids(where, clauses, offset=2, limit=2)
            sql = str(query.compile(engine, compile_kwargs={"literal_binds": True}))
            if sqlite:
                plan = [row[3] for row in conn.exec_driver_sql(f"EXPLAIN QUERY PLAN {sql}")]
                assert not any("TEMP B-TREE" in step for step in plan), plan
                assert any("COVERING INDEX ix_training_jobs_tuning_objective" in s for s in plan)
            else:
                plan = [row[0] for row in conn.exec_driver_sql(f"EXPLAIN {sql}")]
                assert not any(step.strip(" ->").startswith("Sort") for step in plan), plan
                assert any("ix_training_jobs_tuning_objective" in step for step in plan), plan
    engine.dispose()


def test_billing_by_capacity_class_is_summed_in_the_database(store: Store) -> None:
    _tuning(store, "t")
    for number, billed in enumerate([{"on-demand": 1.5}, {"on-demand": 2.0, "spot": 4.0}, None]):
        job_id = _trial(store, "t", number, JobStatus.IN_PROGRESS)
        outcome = JobOutcome(JobStatus.COMPLETED, 1.0, 2.0, 1.0, 6.0, {}, billable_by_class=billed)
        store.finish_training_job(job_id, outcome)
    assert store.trials.billable_by_class("t") == {"on-demand": 3.5, "spot": 4.0}
    _tuning(store, "on-demand only")
    job_id = _trial(store, "on-demand only", 0, JobStatus.IN_PROGRESS)
    outcome = JobOutcome(
        JobStatus.COMPLETED, 1.0, 2.0, 1.0, 6.0, {}, billable_by_class={"on-demand": 1.0}
    )
    store.finish_training_job(job_id, outcome)
    assert store.trials.billable_by_class("on-demand only") == {"on-demand": 1.0}  # no spot key
    assert store.trials.billable_by_class("none") == {}


def test_a_trial_rows_columns_are_its_first_fields_in_order() -> None:
    import dataclasses

    from scaletune.store import TrialRow
    from scaletune.store._queries import _ROW_COLUMNS

    # rows are built by position: a column added to one must go to the other at that place
    fields = [field.name for field in dataclasses.fields(TrialRow)]
    assert [column.name for column in _ROW_COLUMNS] == fields[: len(_ROW_COLUMNS)]
