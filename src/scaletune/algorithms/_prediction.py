"""What each worker of a batch prediction runs: its shard of the rows scored with a job's
published model, written where the controller collects the parts in rank order."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from scaletune.worker import WorkerContext

INPUT_CHANNEL = "data"


class PredictionSettings(BaseModel):
    """A batch prediction's task, as every worker gets it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    algorithm: str
    model_dir: str  # the job's published model, on a filesystem every worker sees
    output_dir: str  # where each rank writes its part


def part_file(output_dir: Path, rank: int) -> Path:
    return output_dir / f"part-{rank:05d}.npy"


def predict_rows(ctx: WorkerContext) -> None:
    from scaletune.algorithms._registry import get_algorithm

    settings = ctx.task.hyperparameters
    assert isinstance(settings, PredictionSettings)  # the controller built it
    table = ctx.channel(INPUT_CHANNEL)
    assert table is not None
    algorithm = get_algorithm(settings.algorithm)
    predicted = algorithm.predict(Path(settings.model_dir), table.features, ctx.threads)
    target = part_file(Path(settings.output_dir), ctx.rank)
    written = target.with_suffix(".partial.npy")
    np.save(written, predicted)
    written.replace(target)  # whole or absent: the controller never reads half a part
