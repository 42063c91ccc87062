"""What a worker's context tells its program."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from pydantic import BaseModel

from scaletune.worker import JUDGED_FILE, WorkerContext, WorkerTask, write_whole
from scaletune.worker._task import Rendezvous


class _NoHyperparameters(BaseModel):
    pass


def _context(
    tmp_path: Path,
    world_size: int = 1,
    concurrent_workers: int | None = None,
    judged_steps: frozenset[int] = frozenset(),
) -> WorkerContext:
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
        stop_file=tmp_path / "stop",
        judged_steps=judged_steps,
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


def _report_in_thread(context: WorkerContext, step: int) -> threading.Thread:
    thread = threading.Thread(target=context.report, args=(step,), kwargs={"loss": 0.5})
    thread.start()
    return thread


@pytest.mark.parametrize("word", ["judged", "stop"])
def test_a_report_at_a_judged_step_holds_the_program_until_the_verdict_is_in(
    tmp_path: Path, word: str
) -> None:
    context = _context(tmp_path, judged_steps=frozenset({3}))
    context.report(2, loss=0.6)  # not judged: returns at once
    write_whole(tmp_path / JUDGED_FILE, "1")  # an earlier rung's verdict holds nothing here
    reporting = _report_in_thread(context, 3)
    reporting.join(0.2)
    assert reporting.is_alive()
    if word == "judged":
        write_whole(tmp_path / JUDGED_FILE, "3")
    else:  # the stop of the verdict, seen first
        write_whole(tmp_path / "stop", "")
    reporting.join(10)
    assert not reporting.is_alive()
    assert context.stop_requested() is (word == "stop")
