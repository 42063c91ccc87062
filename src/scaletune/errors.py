"""Project exceptions. Every message names the bad value, on one line."""

from __future__ import annotations


class ScaletuneError(Exception):
    """Base of every error scaletune raises on purpose."""


class InvalidInputError(ScaletuneError):
    """A user-supplied value (spec, data, option) is wrong. The CLI exits with code 2."""


class JobNotFoundError(InvalidInputError):
    def __init__(self, job_id: str, kind: str = "training job") -> None:
        super().__init__(f"no {kind} with id {job_id!r}")
        self.job_id = job_id


class CheckpointNotReadyError(InvalidInputError):
    """The checkpoint a job would start from is not usable yet: the job that saves it has
    not stored every report up to it (or saved none). Asked again later, it may be."""


class StoreError(ScaletuneError):
    """The store cannot be opened or used (bad URL, schema version mismatch)."""


class StoreUnavailableError(StoreError):
    """The store did not answer (its server down, a connection lost, a lock held by another
    process) for longer than the wait allowed. The CLI exits with code 3."""


class WorkerStartError(ScaletuneError):
    """Worker processes could not be started."""


class ClusterTooSmallError(WorkerStartError):
    """A job needs more than the whole cluster has: waiting or retrying would never help."""


class LaunchAbandonedError(ScaletuneError):
    """The job was stopped (its message says why) while its workers waited for room."""
