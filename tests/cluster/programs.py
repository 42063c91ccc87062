"""Worker programs for the launcher tests (module-level, so workers import them by name)."""

from __future__ import annotations

import os
import signal
import sys
import threading

from scaletune.worker import WorkerContext


def report_three_steps(ctx: WorkerContext) -> None:
    print(f"hello from rank {ctx.rank} of {ctx.world_size}", flush=True)
    os.write(2, b"native stderr line\n")  # as C++ libraries write, below Python
    for step in (1, 2, 3):
        ctx.report(step, loss=1.0 / step, rank=float(ctx.rank))


def report_until_stopped(ctx: WorkerContext) -> None:
    """A program that checks: it reports until asked to stop, then saves and returns."""
    step = 0
    while not ctx.stop_requested():
        step += 1
        ctx.report(step, loss=1.0 / step)
        threading.Event().wait(0.01)
    if ctx.is_chief:
        (ctx.model_dir / "stopped-at.txt").write_text(str(step))


def raise_on_rank_one(ctx: WorkerContext) -> None:
    if ctx.rank == 1:
        raise ValueError("bad shard on rank 1")
    threading.Event().wait()  # the others block, as in a collective, until they are killed


def block_until_killed(ctx: WorkerContext) -> None:
    ctx.report(1, ready=1.0)
    threading.Event().wait()


def ignore_sigterm_and_block(ctx: WorkerContext) -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    ctx.report(1, ready=1.0)
    threading.Event().wait()


def exit_hard(ctx: WorkerContext) -> None:
    sys.stdout.flush()
    os._exit(3)


class Unpicklable:
    """Pickles fine here, fails to load in a worker: its module is missing there."""

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (__import__, ("module_that_exists_nowhere",))
