"""What a worker is told about checkpoints: where, how often, and which one to start from."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CheckpointPlan:
    root: str  # this job's checkpoint folder: a path or a URL
    every_steps: int | None
    every_seconds: float | None
    keep: int
    resume_step: int | None = None  # the complete checkpoint this attempt starts from
    resume_reported_step: int | None = None  # the last step reported when it was saved
