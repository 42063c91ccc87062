"""Worker programs for benchmarks (importable by module name, as workers need)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel

from scaletune.worker import WorkerContext


def do_nothing(ctx: WorkerContext) -> None:
    """The empty program: measures placement and hand-off only."""


class NoHyperparameters(BaseModel):
    pass


def ddp_step(ctx: WorkerContext) -> None:
    """A 3-worker job with no work to speak of: join the gloo group, one DDP step (one
    all-reduce), report, leave. `train_seconds` is the step alone, so what a trial takes
    beyond it is the tool's overhead (the group's set-up included)."""
    import time

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    rendezvous = ctx.task.rendezvous
    dist.init_process_group(
        "gloo",
        init_method=f"tcp://{rendezvous.master_addr}:{rendezvous.master_port}",
        rank=ctx.task.rank,
        world_size=ctx.task.world_size,
    )
    try:
        started = time.perf_counter()
        loss = ddp_model_step(DistributedDataParallel(nn.Linear(16, 2)))
        dist.barrier()
        ctx.report(1, loss=loss, train_seconds=time.perf_counter() - started)
    finally:
        dist.destroy_process_group()


def ddp_model_step(model: Any) -> float:
    """One forward/backward of a tiny model on a fixed batch (one gradient all-reduce)."""
    import torch

    generator = torch.Generator().manual_seed(0)
    loss = model(torch.randn(8, 16, generator=generator)).pow(2).mean()
    loss.backward()
    return float(loss)


def xgboost_samplers_kept(ctx: WorkerContext) -> None:
    """scaletune's XGBoost program with its samplers never rebuilt (XGBoost's own loop): what
    a sampled job cost before it resumed exactly (benchmarks/faults/xgboost_exact_resume.py)."""
    from scaletune.algorithms.xgboost import _program

    _program._fresh_samplers = lambda booster: None  # this worker process only
    _program.train_xgboost(ctx)


def lightgbm_rank1_killed_at_round_37(ctx: WorkerContext) -> None:
    """Built-in LightGBM whose rank 1 is killed (SIGKILL) as it reports round 37 of its first
    attempt: a worker lost mid-job, as a machine that goes away loses it."""
    import os
    import signal

    from scaletune.algorithms.lightgbm._program import train_lightgbm

    if ctx.rank == 1 and ctx.task.attempt == 1:
        report = ctx.report

        def report_then_die(step: int, **metrics: float) -> None:
            report(step, **metrics)
            if step == 37:
                os.kill(os.getpid(), signal.SIGKILL)

        ctx.report = report_then_die  # type: ignore[method-assign]
    train_lightgbm(ctx)


STRAGGLER_FILE_VARIABLE = "SCALETUNE_BENCH_STRAGGLER_FILE"


def dnn_with_a_straggler(ctx: WorkerContext) -> None:
    """scaletune's DNN program with one rank slowed: after each micro-batch's backward pass it
    waits a fixed time (a slower machine). The file named by $SCALETUNE_BENCH_STRAGGLER_FILE,
    which the benchmark writes before each job, says "<rank> <seconds>"; read per job, since
    a warm worker process outlives the job (benchmarks/convergence/stragglers.py)."""
    import importlib
    import os
    import time
    from pathlib import Path

    from scaletune.algorithms.dnn._program import train_dnn

    rank, seconds = Path(os.environ[STRAGGLER_FILE_VARIABLE]).read_text().split()
    if ctx.rank != int(rank):
        train_dnn(ctx)
        return
    # The training loops' own name for the backward pass, swapped for this job alone.
    loops = [
        importlib.import_module(f"scaletune.algorithms.dnn.{module}")
        for module in ("_common", "_allreduce")  # the server's and backup rounds', DDP's
    ]
    name = "backward"
    backward = getattr(loops[0], name)

    def slowed_backward(loss: Any) -> None:
        backward(loss)
        time.sleep(float(seconds))

    for loop in loops:
        setattr(loop, name, slowed_backward)
    try:
        train_dnn(ctx)
    finally:  # the process may run another job's rank next
        for loop in loops:
            setattr(loop, name, backward)
