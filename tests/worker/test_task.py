"""What a worker's context tells its program."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import BaseModel

from scaletune.worker import WorkerContext, WorkerTask
from scaletune.worker._task import Rendezvous


class _NoHyperparameters(BaseModel):
    pass


def _context(tmp_path: Path, world_size: int, concurrent_workers: int | None) -> WorkerContext:
    task = WorkerTask(
        job_id="job",
        rank=0,
        world_size=world_size,
        program=print,
        hyperparameters=_NoHyperparameters(),
        channels={},
        model_dir=tmp_path,
        log_path=tmp_path / "log",
        rendezvous=Rendezvous("127.0.0.1", 0),
        seed=0,
        concurrent_workers=concurrent_workers,
    )
    return WorkerContext(task, send=lambda event: None)


@pytest.mark.parametrize(
    ("world_size", "concurrent_workers", "threads"),
    [
        (1, None, 8),  # a job alone on the machine: every core
        (3, None, 2),  # its own three workers share them
        (1, 4, 2),  # four one-worker trials at once: a quarter each
        (3, 12, 1),  # more workers than cores: one thread, never none
    ],
)
def test_threads_are_the_machines_cores_shared_among_the_workers_training_at_once(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    world_size: int,
    concurrent_workers: int | None,
    threads: int,
) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 8)
    assert _context(tmp_path, world_size, concurrent_workers).threads == threads
