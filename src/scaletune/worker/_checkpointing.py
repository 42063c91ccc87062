"""A worker program's view of its job's checkpoints: the one to resume from, when the next is
due, and a save that never takes the job down with it."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import Any

from scaletune.checkpoints import CheckpointError, CheckpointFolder, CheckpointPlan
from scaletune.worker._messages import CheckpointSaved


class WorkerCheckpoints:
    def __init__(
        self,
        plan: CheckpointPlan,
        rank: int,
        send: Callable[[CheckpointSaved], None],
        reported_step: Callable[[], int | None],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.plan = plan
        self._rank = rank
        self._send = send
        # Saved with each checkpoint: a retry forgets the metrics reported past it.
        self._reported_step = reported_step
        self._monotonic = monotonic
        self._folder = CheckpointFolder(plan.root)
        self._last_save = monotonic()

    @property
    def resume_step(self) -> int | None:
        """The step of the checkpoint this attempt starts from; None to start afresh."""
        return self.plan.resume_step

    def load(self) -> dict[str, bytes]:
        """The files of the checkpoint to resume from (checked against its manifest)."""
        if self.plan.resume_step is None:
            raise CheckpointError("this attempt starts afresh: there is no checkpoint to load")
        folder = self._folder
        return folder.load(folder.at(self.plan.resume_step))

    def step_due(self, step: int) -> bool:
        """Due by count: the same answer on every rank, so no agreement is needed."""
        every = self.plan.every_steps
        return every is not None and step > 0 and step % every == 0

    def time_due(self) -> bool:
        """Due by the clock: ranks' clocks differ, so programs agree on this collectively."""
        every = self.plan.every_seconds
        return every is not None and self._monotonic() - self._last_save >= every

    def saved_by_another_rank(self) -> None:
        """The ranks agreed on a checkpoint and another rank saved it: the interval counts
        from now here too (else this rank would find one due at every agreement after it)."""
        self._last_save = self._monotonic()

    def saved_by_program(self, step: int, seconds: float) -> None:
        """A user's script saved a checkpoint itself (`scaletune.checkpoint`): tell the
        controller, and count the interval from now."""
        self._last_save = self._monotonic()
        self._send(CheckpointSaved(self._rank, step, seconds))

    def save(
        self, step: int, files: Mapping[str, bytes], meta: Mapping[str, Any] | None = None
    ) -> bool:
        """Publish a checkpoint of `step` (one rank saves: the others' state comes in its
        files; `meta` may say its own `reported_step` for one saved from an earlier step).
        A failure is logged and leaves the last good checkpoint as it was: the job
        goes on, and so does the clock, so a full disk is not retried at every step."""
        started = self._monotonic()
        self._last_save = started
        try:
            meta = {"reported_step": self._reported_step(), **(meta or {})}
            self._folder.save(step, files, meta, saved_at=time.time())
            self._folder.prune(self.plan.keep)
        except CheckpointError as exc:
            print(f"scaletune: {exc}", file=sys.stderr, flush=True)
            return False
        self._send(CheckpointSaved(self._rank, step, self._monotonic() - started))
        return True
