"""Where one job's files go: its logs, and its published model."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from scaletune.data import join_url
from scaletune.spec import TrainingJobSpec, is_url

SCRATCH_PREFIX = "scaletune-"  # a running job's temp folder: scaletune-<job id>-<random>


@dataclass(frozen=True)
class JobPaths:
    logs: Path
    artifact: Path  # the model folder, published only when the job completes
    checkpoints: Path | str = Path()  # a folder, or a URL (checkpoint.path)
    unsent_reports: Path = Path()  # reports waiting for the store past the writer's bound

    @classmethod
    def for_job(cls, jobs_dir: Path, job_id: str, spec: TrainingJobSpec) -> JobPaths:
        root = jobs_dir / job_id
        output = (spec.output_path / job_id) if spec.output_path else root / "output"
        return cls(
            logs=root / "logs",
            artifact=output / "model",
            checkpoints=checkpoints_of(
                jobs_dir, job_id, spec.checkpoint.path, spec.cluster.staging
            ),
            unsent_reports=root / "unsent-reports.jsonl",
        )

    def log_path(self, rank: int) -> Path:
        return self.logs / f"worker-{rank}.log"


def checkpoints_of(
    jobs_dir: Path, job_id: str, path: Path | str | None, staging: Path | str | None
) -> Path | str:
    """Where a job keeps its checkpoints: `checkpoint.path`, else beside what it stages at
    its staging location, else in its own folder. Paths are folders; strings, URLs."""
    where = path
    if where is None and staging is not None:
        # Workers on other machines reach the staging location: checkpoints go beside what
        # the job stages there (which is removed; they are kept).
        where = (
            join_url(staging, "checkpoints")
            if isinstance(staging, str)
            else staging / "checkpoints"
        )
    if where is None:
        return jobs_dir / job_id / "checkpoints"
    return join_url(where, job_id) if isinstance(where, str) else where / job_id


def stored_location(value: str | None) -> Path | str | None:
    """A location as a stored spec holds it (text): a URL stays text, a folder a Path."""
    return value if value is None or is_url(value) else Path(value)
