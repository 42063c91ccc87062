"""Tables, in SQLAlchemy Core; the same on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    JSON,
    Boolean,
    Column,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Table,
    Text,
)

SCHEMA_VERSION = 14

metadata = MetaData()

meta = Table(
    "scaletune_meta",
    metadata,
    Column("key", String(64), primary_key=True),
    Column("value", String(256), nullable=False),
)

training_jobs = Table(
    "training_jobs",
    metadata,
    Column("id", String(96), primary_key=True),
    Column("name", String(64)),
    Column("algorithm", String(32), nullable=False),
    Column("status", String(16), nullable=False, index=True),
    Column("spec", JSON, nullable=False),
    Column("hyperparameters", JSON, nullable=False),
    Column("instance_count", Integer, nullable=False),
    Column("created_at", Float, nullable=False, index=True),
    Column("start_time", Float),
    Column("end_time", Float),
    Column("wall_seconds", Float),
    Column("billable_seconds", Float),
    Column("final_metrics", JSON, nullable=False),
    Column("failure_reason", Text),
    Column("artifact", Text),
    Column("log_dir", Text),
    Column("stop_requested", Boolean, nullable=False, default=False),
    Column("controller_pid", Integer),
    Column("controller_host", String(255)),
    # Set for the trials of a tuning job (schema version 2).
    Column("tuning_job_id", String(96), index=True),
    Column("trial_number", Integer),
    Column("objective", Float),  # the objective's last reported value
    Column("resource", Integer),  # the objective's last step: how far the trial got
    # Set while the job's workers wait for room on a busy cluster (schema version 4).
    Column("waiting_since", Float),
    # Version 6: what a tuning job's cost estimate needs, kept per trial so that a summary of
    # 10,000 trials is a few aggregates: the steps the trial would run were nothing to stop
    # it, and its seconds per step of resource (from its objective's first and last report).
    Column("full_resource", Integer),
    Column("seconds_per_step", Float),
    # Version 7: the Hyperband bracket the trial was drawn into (its rungs), where it has one.
    Column("hyperband_bracket", Integer),
    # Version 10: the size an elastic job was asked to take (`jobs resize`); None: its most.
    Column("requested_size", Integer),
    # Version 13: its billable seconds on each capacity class ({"on-demand": s, "spot": s}).
    Column("billable_by_class", JSON),
    Index("ix_training_jobs_tuning_trial", "tuning_job_id", "trial_number"),
    # Covering indexes: a summary's aggregates read these, never the wide rows (specs).
    Index(
        "ix_training_jobs_tuning_status",
        "tuning_job_id",
        "status",
        "billable_seconds",
        "wall_seconds",
        "resource",
        "full_resource",
        "seconds_per_step",
        "instance_count",
    ),
    Index("ix_training_jobs_tuning_pace", "tuning_job_id", "seconds_per_step"),
    # A tuning job's trials newest first, a page at a time (`jobs list --tuning-job`).
    Index("ix_training_jobs_tuning_created", "tuning_job_id", "created_at"),
)


def _objective_page_index(name: str, objective: Any) -> Index:
    """Version 9: a page of a tuning job's trials by objective (the console's trials table,
    best or worst first) read off an index in its exact order (no value last, then by trial
    number, as TrialOrder sorts), so a page deep in 100,000 trials skips index entries
    instead of sorting them all. Covering: the page's ids, and the status a table that shows
    some statuses only filters on."""
    return Index(
        name,
        training_jobs.c.tuning_job_id,
        training_jobs.c.objective.is_(None),
        objective,
        training_jobs.c.trial_number,
        training_jobs.c.id,
        training_jobs.c.status,
    )


_objective_page_index("ix_training_jobs_tuning_objective_high", training_jobs.c.objective.desc())
_objective_page_index("ix_training_jobs_tuning_objective_low", training_jobs.c.objective)

# Columns version 7 added to training_jobs.
TRAINING_JOB_COLUMNS_V7 = (("hyperband_bracket", "INTEGER"),)

# Columns version 13 added to training_jobs.
TRAINING_JOB_COLUMNS_V13 = (("billable_by_class", "JSON"),)

# Columns version 10 added to training_jobs.
TRAINING_JOB_COLUMNS_V10 = (("requested_size", "INTEGER"),)

# Columns version 8 added to job_attempts.
JOB_ATTEMPT_COLUMNS_V8 = (("workers", "TEXT"),)

# Columns version 6 added to training_jobs.
TRAINING_JOB_COLUMNS_V6 = (("full_resource", "INTEGER"), ("seconds_per_step", "FLOAT"))

# Columns version 2 added to training_jobs, for migrating a version 1 store in place.
TRAINING_JOB_COLUMNS_V2 = (
    ("tuning_job_id", "VARCHAR(96)"),
    ("trial_number", "INTEGER"),
    ("objective", "FLOAT"),
    ("resource", "INTEGER"),
)

tuning_jobs = Table(
    "tuning_jobs",
    metadata,
    Column("id", String(96), primary_key=True),
    Column("name", String(64)),
    Column("strategy", String(16), nullable=False),
    Column("status", String(16), nullable=False, index=True),
    Column("spec", JSON, nullable=False),
    Column("created_at", Float, nullable=False, index=True),
    Column("start_time", Float),
    Column("end_time", Float),
    Column("wall_seconds", Float),
    Column("best_training_job", String(96)),
    Column("best_objective", Float),
    Column("failure_reason", Text),
    Column("stop_requested", Boolean, nullable=False, default=False),
    Column("controller_pid", Integer),
    Column("controller_host", String(255)),
    # The controller running it, and until when it may without renewing (version 11).
    Column("lease_holder", String(128)),
    Column("lease_expires", Float),
    # Why a Completed one ended when it did: max_jobs, or a rule that ended it sooner (14).
    Column("completion_reason", Text),
)
TUNING_JOB_COLUMNS_V11 = (("lease_holder", "VARCHAR(128)"), ("lease_expires", "FLOAT"))
TUNING_JOB_COLUMNS_V14 = (("completion_reason", "TEXT"),)


def _reported(name: str, value: Column[Any], index: Index) -> Table:
    """A table of values a job reported, one row per (metric, step); the two that exist
    differ only in how the value is stored. (A Column belongs to one table: made afresh.)"""
    return Table(
        name,
        metadata,
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column(
            "job_id",
            String(96),
            ForeignKey("training_jobs.id", ondelete="CASCADE"),
            nullable=False,
        ),
        Column("name", String(128), nullable=False),
        Column("step", Integer, nullable=False),
        value,
        Column("time", Float, nullable=False),
        index,
    )


metric_points = _reported(
    "metric_points",
    Column("value", Float, nullable=False),
    Index("ix_metric_points_job_name_step", "job_id", "name", "step"),
)

# Version 3: reports a worker refused to record (a NaN or infinite value), kept so that a
# job's page says why a metric has a gap.
rejected_metrics = _reported(
    "rejected_metrics",
    Column("value", String(32), nullable=False),  # as text: 'nan', 'inf', '-inf'
    Index("ix_rejected_metrics_job", "job_id"),
)

# Version 5: every attempt of a training job (a retry, or a resume by hand, is a new one).
job_attempts = Table(
    "job_attempts",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "job_id", String(96), ForeignKey("training_jobs.id", ondelete="CASCADE"), nullable=False
    ),
    Column("number", Integer, nullable=False),  # 1, 2, ...
    Column("start_time", Float, nullable=False),
    Column("end_time", Float),
    Column("status", String(16), nullable=False),  # how it ended (InProgress while it runs)
    Column("reason", Text),
    Column("retried", Boolean, nullable=False, default=False),  # a next attempt followed
    Column("resumed_from_step", Integer),  # the checkpoint it started from; None: afresh
    Column("steps_redone", Integer),  # reported steps the last attempt had passed, run again
    Column("checkpoint_step", Integer),  # its latest complete checkpoint
    Column("workers", Text),  # JSON: where each rank ran (host and pid, or Ray node)
    Index("ix_job_attempts_job_number", "job_id", "number", unique=True),
)

# Version 12: preemption notices a job's workers got (their machine leaves at a deadline).
worker_notices = Table(
    "worker_notices",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column(
        "job_id", String(96), ForeignKey("training_jobs.id", ondelete="CASCADE"), nullable=False
    ),
    Column("attempt", Integer, nullable=False),  # the attempt whose worker got it
    Column("rank", Integer, nullable=False),
    Column("seconds", Float, nullable=False),  # from given_at to the machine's end
    Column("source", String(32), nullable=False),  # SIGTERM, jobs notice, a Ray drain
    Column("given_at", Float, nullable=False),
    Index("ix_worker_notices_job_attempt", "job_id", "attempt"),
)
