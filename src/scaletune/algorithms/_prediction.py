"""What each worker of a batch prediction runs: its shard of the rows scored with a job's
published model, written where the controller collects the parts in rank order. The model
and the parts are at folders or URLs: with staging at a URL, a worker on another machine
fetches the model and uploads its part."""

from __future__ import annotations

import contextlib
import io
import tempfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
from pydantic import BaseModel, ConfigDict

from scaletune.data import filesystem, get_folder, join_url, reading
from scaletune.data._table import FloatArray
from scaletune.spec import is_url
from scaletune.worker import WorkerContext

INPUT_CHANNEL = "data"


class PredictionSettings(BaseModel):
    """A batch prediction's task, as every worker gets it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    algorithm: str
    model_dir: str  # the job's published model: a folder every worker sees, or a URL
    output_dir: str  # where each rank writes its part: a folder or a URL


def part_name(rank: int) -> str:
    return f"part-{rank:05d}.npy"


def predict_rows(ctx: WorkerContext) -> None:
    from scaletune.algorithms._registry import get_algorithm

    settings = ctx.task.hyperparameters
    assert isinstance(settings, PredictionSettings)  # the controller built it
    table = ctx.channel(INPUT_CHANNEL)
    assert table is not None
    algorithm = get_algorithm(settings.algorithm)
    with _model_here(settings.model_dir) as model_dir:
        predicted = algorithm.predict(model_dir, table.features, ctx.threads)
    write_part(settings.output_dir, ctx.rank, predicted)


@contextlib.contextmanager
def _model_here(location: str) -> Iterator[Path]:
    """The model as a folder on this machine: fetched into a temp folder from a URL."""
    if not is_url(location):
        yield Path(location)
        return
    with tempfile.TemporaryDirectory(prefix="scaletune-model-") as folder:
        get_folder(location, Path(folder))
        yield Path(folder)


def write_part(output: str, rank: int, values: FloatArray) -> None:
    """This rank's part, in a folder or at a URL alike (fsspec serves both). The controller
    reads the parts only once every worker has finished."""
    buffer = io.BytesIO()
    np.save(buffer, values)
    url = join_url(output, part_name(rank))
    with reading(url):
        fs, path = filesystem(url)
        fs.pipe_file(path, buffer.getvalue())


def read_part(output: str, rank: int) -> FloatArray:
    url = join_url(output, part_name(rank))
    with reading(url):
        fs, path = filesystem(url)
        values: FloatArray = np.load(io.BytesIO(fs.cat_file(path)))
    return values
