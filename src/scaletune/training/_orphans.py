"""Jobs whose controller died (kill -9, power loss) are marked Failed when next looked at.

`jobs list` and `jobs show` call this on every job they print: what only an orphan needs
(the spec's models, fsspec for staged data) is imported when one is found."""

from __future__ import annotations

import shutil
import socket
import tempfile
from pathlib import Path

import psutil

from scaletune.store import JobStatus, Store, TrainingJobRecord


def controller_alive(record: TrainingJobRecord) -> bool:
    return process_alive(record.controller_pid, record.controller_host)


def process_alive(pid: int | None, host: str | None) -> bool:
    """Only processes on this host can be checked; others are assumed alive."""
    if pid is None or host != socket.gethostname():
        return True
    try:
        return bool(psutil.Process(pid).status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def remove_scratch(job_id: str, staging: Path | str | None = None) -> None:
    """A job's private temp folder, and what it staged elsewhere, left behind when its
    controller was killed (kill -9)."""
    from scaletune.training._paths import SCRATCH_PREFIX
    from scaletune.training._staging import remove_orphaned_staging

    for folder in Path(tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}{job_id}-*"):
        shutil.rmtree(folder, ignore_errors=True)
    if staging is not None:
        remove_orphaned_staging(staging, job_id)


def reconcile_orphan(store: Store, record: TrainingJobRecord, now: float) -> TrainingJobRecord:
    if record.status is not JobStatus.IN_PROGRESS or controller_alive(record):
        return record
    status = JobStatus.STOPPED if record.stop_requested else JobStatus.FAILED
    remove_scratch(record.id, staging_of(record))
    store.abandon_training_job(
        record.id,
        status,
        f"controller process {record.controller_pid} ended without finishing the job",
        now,
    )
    return store.get_training_job(record.id)


def staging_of(record: TrainingJobRecord) -> Path | str | None:
    """Where the job staged its data, from its stored spec (read as is: re-validating it
    would check paths that may be gone by now)."""
    from scaletune.spec import is_url

    staging = record.spec_view.staging
    if staging is None:
        return None
    return staging if is_url(staging) else Path(staging)
