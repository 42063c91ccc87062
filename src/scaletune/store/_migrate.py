"""Creating a store, or bringing an older one up to this version in place."""

from __future__ import annotations

from sqlalchemy import insert, inspect, select, text, update
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateIndex

from scaletune.store._schema import (
    JOB_ATTEMPT_COLUMNS_V8,
    SCHEMA_VERSION,
    TRAINING_JOB_COLUMNS_V2,
    TRAINING_JOB_COLUMNS_V6,
    TRAINING_JOB_COLUMNS_V7,
    TRAINING_JOB_COLUMNS_V10,
    TRAINING_JOB_COLUMNS_V13,
    TUNING_JOB_COLUMNS_V11,
    TUNING_JOB_COLUMNS_V14,
    job_attempts,
    meta,
    metadata,
    training_jobs,
    tuning_jobs,
)


def open_schema(conn: Connection) -> str | None:
    """Create the tables in an empty database, or migrate an older store step by step;
    returns the schema version found at the end (the caller refuses one it cannot read)."""
    if not inspect(conn).has_table(meta.name):
        metadata.create_all(conn)
        conn.execute(insert(meta).values(key="schema_version", value=str(SCHEMA_VERSION)))
        return str(SCHEMA_VERSION)
    found = conn.execute(select(meta.c.value).where(meta.c.key == "schema_version"))
    version = found.scalar_one_or_none()
    if version == "1":  # add what version 2 brought: tuning jobs
        for column, sql_type in TRAINING_JOB_COLUMNS_V2:
            conn.execute(text(f"ALTER TABLE training_jobs ADD COLUMN {column} {sql_type}"))
        metadata.create_all(conn)  # the new tables
        _create_indexes(conn)  # and the new columns' indexes
        version = _set_version(conn, "2")
    if version == "2":  # version 3 brought the rejected_metrics table
        metadata.create_all(conn)
        version = _set_version(conn, "3")
    if version == "3":  # version 4: when a job's workers began to wait for room
        conn.execute(text("ALTER TABLE training_jobs ADD COLUMN waiting_since FLOAT"))
        version = _set_version(conn, "4")
    if version == "4":  # version 5: the job_attempts table
        metadata.create_all(conn)
        version = _set_version(conn, "5")
    if version == "5":  # version 6: per-trial cost figures, and indexes for large tuning jobs
        for column, sql_type in TRAINING_JOB_COLUMNS_V6:
            conn.execute(text(f"ALTER TABLE training_jobs ADD COLUMN {column} {sql_type}"))
        _create_indexes(conn)
        version = _set_version(conn, "6")
    if version == "6":  # version 7: each trial's Hyperband bracket
        for column, sql_type in TRAINING_JOB_COLUMNS_V7:
            conn.execute(text(f"ALTER TABLE training_jobs ADD COLUMN {column} {sql_type}"))
        version = _set_version(conn, "7")
    if version == "7":  # version 8: where each attempt's workers ran
        # (a store from before version 5 made the table anew, with them)
        _add_missing_columns(conn, job_attempts.name, JOB_ATTEMPT_COLUMNS_V8)
        version = _set_version(conn, "8")
    if version == "8":  # version 9: trial pages by objective read off an index
        _create_indexes(conn)
        version = _set_version(conn, "9")
    if version == "9":  # version 10: the size an elastic job was asked to take
        _add_missing_columns(conn, training_jobs.name, TRAINING_JOB_COLUMNS_V10)
        version = _set_version(conn, "10")
    if version == "10":  # version 11: a tuning job's lease, so that one controller runs it
        _add_missing_columns(conn, tuning_jobs.name, TUNING_JOB_COLUMNS_V11)
        version = _set_version(conn, "11")
    if version == "11":  # version 12: the worker_notices table
        metadata.create_all(conn)
        version = _set_version(conn, "12")
    if version == "12":  # version 13: billable seconds per capacity class
        _add_missing_columns(conn, training_jobs.name, TRAINING_JOB_COLUMNS_V13)
        version = _set_version(conn, "13")
    if version == "13":  # version 14: why a completed tuning job ended when it did
        _add_missing_columns(conn, tuning_jobs.name, TUNING_JOB_COLUMNS_V14)
        version = _set_version(conn, "14")
    return version


def _add_missing_columns(
    conn: Connection, table: str, columns: tuple[tuple[str, str], ...]
) -> None:
    """Add those of `columns` (name, SQL type) that `table` lacks: a table that a later
    version's create_all made anew has them already."""
    present = {column["name"] for column in inspect(conn).get_columns(table)}
    for column, sql_type in columns:
        if column not in present:
            conn.execute(text(f"ALTER TABLE {table} ADD COLUMN {column} {sql_type}"))


def _create_indexes(conn: Connection) -> None:
    """training_jobs' indexes over columns it has by now (later versions add the rest)."""
    present = {column["name"] for column in inspect(conn).get_columns(training_jobs.name)}
    for index in training_jobs.indexes:
        if {column.name for column in index.columns} <= present:
            # Not checkfirst: reflection skips indexes over expressions (version 9's).
            conn.execute(CreateIndex(index, if_not_exists=True))


def _set_version(conn: Connection, version: str) -> str:
    conn.execute(update(meta).where(meta.c.key == "schema_version").values(value=version))
    return version
