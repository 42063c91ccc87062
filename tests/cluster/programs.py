"""Worker programs for the launcher tests (module-level, so workers import them by name)."""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable

from scaletune.worker import WorkerContext, inherited_environment


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


def finish_as_the_stop_arrives(ctx: WorkerContext) -> None:
    """A program whose last step ends as a stop reaches it: it never asks, and returns with
    its work done (fast rounds that ran out before a tuner's pause got to them)."""
    ctx.report(1, loss=1.0)
    assert ctx.task.stop_file is not None  # the local backend's way of asking
    while not ctx.task.stop_file.exists():
        threading.Event().wait(0.01)
    if ctx.is_chief:
        (ctx.model_dir / "finished.txt").write_text("1")


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


def _signal_self(signum: int) -> Callable[[], None]:
    """What sends this worker process `signum`: a real kill (or stop) at a known point."""

    def send() -> None:
        sys.stdout.flush()
        os.kill(os.getpid(), signum)

    return send


def _hang() -> None:
    """Block the program for good, alive: its heartbeats go on, its peers wait in their next
    collective until it times out."""
    threading.Event().wait()


def _at_round(ctx: WorkerContext, round_number: int, action: Callable[[], object]) -> None:
    """`action` as the program reports round `round_number` (XGBoost reports after every
    round, on every rank)."""
    report = ctx.report

    def report_then_act(step: int, **metrics: float) -> None:
        report(step, **metrics)
        if step == round_number:
            action()

    ctx.report = report_then_act  # type: ignore[method-assign]


def _at_stop_check(ctx: WorkerContext, check: int, action: Callable[[], object]) -> None:
    """`action` when the program asks, for the `check`-th time, whether to stop."""
    asked = 0
    ask = ctx.stop_requested

    def stop_requested() -> bool:
        nonlocal asked
        asked += 1
        if asked == check:
            action()
        return ask()

    ctx.stop_requested = stop_requested  # type: ignore[method-assign]


def xgboost_rank1_killed_at_round_7(ctx: WorkerContext) -> None:
    """Built-in XGBoost whose rank 1 is killed (SIGKILL) at round 7 of its first attempt."""
    from scaletune.algorithms.xgboost._program import train_xgboost

    if ctx.rank == 1 and ctx.task.attempt == 1:
        _at_round(ctx, 7, _signal_self(signal.SIGKILL))
    train_xgboost(ctx)


def xgboost_held_at_round_5_until_stopped(ctx: WorkerContext) -> None:
    """Built-in XGBoost whose first attempt waits after round 5 until a stop is asked: a stop
    asked there lands mid-job however fast the rounds run."""
    from scaletune.algorithms.xgboost._program import train_xgboost

    if ctx.task.attempt == 1:
        _at_round(ctx, 5, lambda: _wait_for_stop(ctx))
    train_xgboost(ctx)


def xgboost_a_tenth_of_a_second_a_round(ctx: WorkerContext) -> None:
    """Built-in XGBoost at a pace a test can act within: each round takes 0.1 s more."""
    from scaletune.algorithms.xgboost._program import train_xgboost

    report = ctx.report

    def paced(step: int, **metrics: float) -> None:
        report(step, **metrics)
        threading.Event().wait(0.1)

    ctx.report = paced  # type: ignore[method-assign]
    train_xgboost(ctx)


def _wait_for_stop(ctx: WorkerContext) -> None:
    while not ctx.stop_requested():
        threading.Event().wait(0.01)


def xgboost_rank1_killed_every_attempt(ctx: WorkerContext) -> None:
    from scaletune.algorithms.xgboost._program import train_xgboost

    if ctx.rank == 1:
        _at_round(ctx, 3, _signal_self(signal.SIGKILL))
    train_xgboost(ctx)


def xgboost_rank1_hangs_at_round_5(ctx: WorkerContext) -> None:
    """Rank 1 hangs, alive, at round 5 of its first attempt."""
    from scaletune.algorithms.xgboost._program import train_xgboost

    if ctx.rank == 1 and ctx.task.attempt == 1:
        _at_round(ctx, 5, _hang)
    train_xgboost(ctx)


def xgboost_rank2_stopped_at_round_5(ctx: WorkerContext) -> None:
    """Rank 2 stops itself (SIGSTOP) at round 5 of its first attempt: it hangs, silent."""
    from scaletune.algorithms.xgboost._program import train_xgboost

    if ctx.rank == 2 and ctx.task.attempt == 1:
        _at_round(ctx, 5, _signal_self(signal.SIGSTOP))
    train_xgboost(ctx)


def raise_on_every_attempt(ctx: WorkerContext) -> None:
    if ctx.rank == 0:
        raise ValueError(f"bad input, attempt {ctx.task.attempt}")
    threading.Event().wait()


def dnn_rank1_killed_on_first_attempt(ctx: WorkerContext) -> None:
    """The built-in DNN whose rank 1 is killed (SIGKILL) mid-epoch, past its first
    checkpoints: all-reduce checks for a stop every 20 updates and at each epoch's end (the
    5th check), the parameter server at every push (the 40th)."""
    from scaletune.algorithms.dnn._program import train_dnn
    from scaletune.spec import DistributionStrategy

    if ctx.rank == 1 and ctx.task.attempt == 1:
        distribution = ctx.task.distribution
        # Rounds with backup workers ask at every gradient, as a parameter server's push.
        every_update = distribution.backup_workers or (
            distribution.strategy is not DistributionStrategy.ALLREDUCE
        )
        _at_stop_check(ctx, 40 if every_update else 5, _signal_self(signal.SIGKILL))
    train_dnn(ctx)


def dnn_rank2_slowed(ctx: WorkerContext) -> None:
    """The built-in DNN whose rank 2 is a slow machine: a round of all-reduce with backup
    workers waits 0.2 s more for its gradient after each backward pass."""
    import time

    from scaletune.algorithms.dnn import _common
    from scaletune.algorithms.dnn._program import train_dnn

    if ctx.rank != 2:
        train_dnn(ctx)
        return
    name = "backward"  # what the rounds' gradients are computed with
    backward = getattr(_common, name)

    def slowed(loss: object) -> None:
        backward(loss)
        time.sleep(0.2)

    setattr(_common, name, slowed)
    try:
        train_dnn(ctx)
    finally:  # the warm process may run another job's rank next
        setattr(_common, name, backward)


def dnn_rank1_hangs_on_first_attempt(ctx: WorkerContext) -> None:
    """The built-in DNN whose rank 1 hangs, alive, mid-epoch (where the kill above hits)."""
    from scaletune.algorithms.dnn._program import train_dnn
    from scaletune.spec import DistributionStrategy

    if ctx.rank == 1 and ctx.task.attempt == 1:
        allreduce = ctx.task.distribution.strategy is DistributionStrategy.ALLREDUCE
        _at_stop_check(ctx, 5 if allreduce else 40, _hang)
    train_dnn(ctx)


def dnn_rank0_port_taken_on_first_attempt(ctx: WorkerContext) -> None:
    """The built-in DNN whose rendezvous port is taken (by this test, standing for another
    process) before rank 0 binds it, on the first attempt only."""
    import socket

    from scaletune.algorithms.dnn._program import train_dnn

    if ctx.rank == 0 and ctx.task.attempt == 1:
        rendezvous = ctx.task.rendezvous
        with socket.create_server((rendezvous.master_addr, rendezvous.master_port)):
            train_dnn(ctx)
    else:
        train_dnn(ctx)


def script_rank1_killed_after_two_checkpoints(ctx: WorkerContext) -> None:
    """A user's script job whose worker 1 (and so its script) is killed on the first attempt
    once rank 0's script has saved two checkpoints of its own."""
    from scaletune.algorithms.script._program import run_script

    if ctx.rank == 1 and ctx.task.attempt == 1:
        assert ctx.task.checkpoint is not None
        root = ctx.task.checkpoint.root

        def kill_after_two() -> None:
            from scaletune.checkpoints import CheckpointFolder

            while len(CheckpointFolder(root).complete()) < 2:
                threading.Event().wait(0.05)
            sys.stdout.flush()
            os.kill(os.getpid(), signal.SIGKILL)

        threading.Thread(target=kill_after_two, daemon=True).start()
    run_script(ctx)


def report_until_stopped_then_rank1_dies(ctx: WorkerContext) -> None:
    """Asked to stop, rank 1 is killed (SIGKILL) instead of ending cleanly."""
    step = 0
    while not ctx.stop_requested():
        step += 1
        ctx.report(step, loss=1.0 / step)
        threading.Event().wait(0.01)
    if ctx.rank == 1:
        os.kill(os.getpid(), signal.SIGKILL)


def report_thread_share(ctx: WorkerContext) -> None:
    """Reports the threads its math would use, and the workers it was told share the machine
    (0: none were named), beside the objective the tuning tests' specs name."""
    ctx.report(
        1,
        threads=float(ctx.threads),
        concurrent_workers=float(ctx.task.concurrent_workers or 0),
        **{"validation:logloss": 1.0},
    )


IMPORTED_IN = os.getpid()  # the process that imported this module


def report_where_programs_were_imported(ctx: WorkerContext) -> None:
    """Whether this module was imported by the process this one was forked from."""
    ctx.report(1, imported_by_parent=float(os.getppid() == IMPORTED_IN))


def report_environment(ctx: WorkerContext) -> None:
    """ST_GIVEN (-1: unset) and whether ST_REMOVED is set, as the program and a script it
    starts see them."""
    inherited = inherited_environment()
    ctx.report(
        1,
        given=float(os.environ.get("ST_GIVEN", "-1")),
        removed=float("ST_REMOVED" in os.environ),
        given_to_scripts=float(inherited.get("ST_GIVEN", "-1")),
        removed_for_scripts=float("ST_REMOVED" in inherited),
    )


def report_parent_and_imports(ctx: WorkerContext) -> None:
    """Whether the preloaded module was imported before this process existed (a fork
    inherits it), and which process started this one."""
    ctx.report(1, parent=float(os.getppid()), preloaded=float("colorsys" in sys.modules))


def report_heavy_imports(ctx: WorkerContext) -> None:
    """Which algorithms' libraries this worker's process has imported."""
    ctx.report(1, **{name: float(name in sys.modules) for name in ("xgboost", "pandas", "torch")})


def lightgbm_rank1_killed_at_round_7(ctx: WorkerContext) -> None:
    """Built-in LightGBM whose rank 1 is killed (SIGKILL) at round 7 of its first attempt."""
    from scaletune.algorithms.lightgbm._program import train_lightgbm

    if ctx.rank == 1 and ctx.task.attempt == 1:
        _at_round(ctx, 7, _signal_self(signal.SIGKILL))
    train_lightgbm(ctx)


def lightgbm_held_at_round_5_until_stopped(ctx: WorkerContext) -> None:
    """Built-in LightGBM whose first attempt waits after round 5 until a stop is asked."""
    from scaletune.algorithms.lightgbm._program import train_lightgbm

    if ctx.task.attempt == 1:
        _at_round(ctx, 5, lambda: _wait_for_stop(ctx))
    train_lightgbm(ctx)


def lightgbm_chief_killed_after_its_last_round(ctx: WorkerContext) -> None:
    """Built-in LightGBM whose rank 0 is killed (SIGKILL) on its first attempt once it has
    trained every round (and saved their checkpoint), as it would be uploading the model."""
    from scaletune.algorithms.lightgbm._program import train_lightgbm

    train_lightgbm(ctx)
    if ctx.rank == 0 and ctx.task.attempt == 1:
        _signal_self(signal.SIGKILL)()


COUNTED_STEPS = 40


def _count_steps(ctx: WorkerContext, *, listens: bool) -> None:
    """40 steps of ~50 ms each (validation:logloss = 1/step, as an XGBoost job names it),
    resumed from the checkpoint of the step
    reached, one saved every `every_steps` (rank 0 saves: the others hold no state)."""
    checkpoints = ctx.checkpoints
    start = 0 if checkpoints is None else checkpoints.resume_step or 0
    for step in range(start + 1, COUNTED_STEPS + 1):
        threading.Event().wait(0.05)  # a step's work
        ctx.report(step, **{"validation:logloss": 1.0 / step})
        stop = listens and ctx.stop_requested()
        if checkpoints is not None and ctx.is_chief and (stop or checkpoints.step_due(step)):
            checkpoints.save(step, {"step": str(step).encode()})
        if stop:
            return


def count_steps(ctx: WorkerContext) -> None:
    """Asked to stop, it saves a checkpoint of the step it reached and returns."""
    _count_steps(ctx, listens=True)


def count_steps_deaf_to_stops(ctx: WorkerContext) -> None:
    """Never asks whether to stop: saves only as `every_steps` says."""
    _count_steps(ctx, listens=False)


def count_steps_sigterm_to_rank1_at_step_5(ctx: WorkerContext) -> None:
    """`count_steps`, whose rank 1 process gets SIGTERM (its machine's notice) after its 5th
    step on the first attempt; it trains on."""
    if ctx.rank == 1 and ctx.task.attempt == 1:
        original = ctx.report

        def report_then_notice(step: int, **metrics: float) -> None:
            original(step, **metrics)
            if step == 5:
                os.kill(os.getpid(), signal.SIGTERM)

        ctx.report = report_then_notice  # type: ignore[method-assign]
    count_steps(ctx)
