"""Jobs whose controller died (kill -9, power loss) are marked Failed when next looked at."""

from __future__ import annotations

import socket

import psutil

from scaletune.store import JobStatus, Store, TrainingJobRecord


def controller_alive(record: TrainingJobRecord) -> bool:
    """Only controllers on this host can be checked; others are assumed alive."""
    if record.controller_pid is None or record.controller_host != socket.gethostname():
        return True
    try:
        process = psutil.Process(record.controller_pid)
        return bool(process.status() != psutil.STATUS_ZOMBIE)
    except psutil.NoSuchProcess:
        return False


def reconcile_orphan(store: Store, record: TrainingJobRecord, now: float) -> TrainingJobRecord:
    if record.status is not JobStatus.IN_PROGRESS or controller_alive(record):
        return record
    status = JobStatus.STOPPED if record.stop_requested else JobStatus.FAILED
    store.abandon_training_job(
        record.id,
        status,
        f"controller process {record.controller_pid} ended without finishing the job",
        now,
    )
    return store.get_training_job(record.id)
