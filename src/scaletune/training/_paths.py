"""Where one job's files go: its logs, and its published model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scaletune.spec import TrainingJobSpec

SCRATCH_PREFIX = "scaletune-"  # a running job's temp folder: scaletune-<job id>-<random>


@dataclass(frozen=True)
class JobPaths:
    logs: Path
    artifact: Path  # the model folder, published only when the job completes

    @classmethod
    def for_job(cls, jobs_dir: Path, job_id: str, spec: TrainingJobSpec) -> JobPaths:
        root = jobs_dir / job_id
        output = (spec.output_path / job_id) if spec.output_path else root / "output"
        return cls(logs=root / "logs", artifact=output / "model")

    def log_path(self, rank: int) -> Path:
        return self.logs / f"worker-{rank}.log"
