"""Checkpoints: what a job saves so that a new attempt resumes where the last one left off.

A checkpoint is a folder `step-NNNNNNNNN/` under the job's checkpoint root (a local or shared
folder, or an object-storage URL), holding the program's files and, written last, a manifest
of their sizes and SHA-256 digests. A folder without a manifest, or whose files do not match
it (a save killed half-way, a torn upload, a full disk), is never loaded."""

from scaletune.checkpoints._folder import Checkpoint, CheckpointError, CheckpointFolder
from scaletune.checkpoints._plan import CheckpointPlan

__all__ = ["Checkpoint", "CheckpointError", "CheckpointFolder", "CheckpointPlan"]
