"""`scaletune jobs notice JOB_ID --worker RANK [--seconds S]`: tell a running job that one of
its workers' machines goes in S seconds (a spot VM's preemption notice, as a user's spot
watcher or a test learns of it). The job saves a checkpoint and goes on without it."""

from __future__ import annotations

import math
import time
from typing import Annotated

import typer

from scaletune.cli._options import StoreOption, open_store, out
from scaletune.errors import InvalidInputError
from scaletune.store import JobStatus, NoticeRecord

SOURCE = "jobs notice"


def jobs_notice(
    job_id: str,
    worker: Annotated[int, typer.Option("--worker", help="The rank whose machine goes.")],
    seconds: Annotated[
        float | None,
        typer.Option(
            "--seconds",
            help="How long until it goes (default: the job's cluster.notice_seconds).",
        ),
    ] = None,
    store: StoreOption = None,
) -> None:
    """Give a running job's worker a preemption notice: the job saves a checkpoint at its next
    step and goes on without that worker (an elastic job) or once there is room again."""
    if seconds is not None and not (math.isfinite(seconds) and seconds > 0):
        raise InvalidInputError(f"--seconds {seconds:g}: a notice gives more than 0 s")
    with open_store(store) as records:
        record = records.get_training_job(job_id)
        if record.status is not JobStatus.IN_PROGRESS:
            raise InvalidInputError(
                f"job {job_id!r} is {record.status.value}: only a running job's workers get a "
                "notice"
            )
        attempts = records.attempts.of(job_id)
        current = attempts[-1] if attempts else None
        if current is None or not current.workers:
            raise InvalidInputError(
                f"job {job_id!r} has no workers placed yet: it is waiting for room"
            )
        if not 0 <= worker < current.size:
            raise InvalidInputError(
                f"--worker {worker}: job {job_id!r} runs ranks 0 to {current.size - 1} "
                f"(attempt {current.number})"
            )
        notice = NoticeRecord(
            attempt=current.number,
            rank=worker,
            seconds=record.spec_view.notice_seconds if seconds is None else seconds,
            source=SOURCE,
            given_at=time.time(),
        )
        records.notices.give(job_id, notice)
    out.print(
        f"job {job_id}: worker {worker}'s machine goes in {notice.seconds:g} s; the job "
        "saves a checkpoint and goes on without it"
    )
