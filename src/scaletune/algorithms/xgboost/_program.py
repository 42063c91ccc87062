"""What each XGBoost worker runs: row-sharded training with histogram all-reduce."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import xgboost as xgb
from xgboost import collective

from scaletune.worker import WorkerContext

from ._hyperparameters import XGBoostHyperparameters

MODEL_FILE = "xgboost-model.json"
CHECKPOINT_FILE = "booster.ubj"  # binary JSON: every float exactly as trained
SAMPLER_PERIOD = 10  # rounds, at most, between fresh samplers (see sampler_period)
AGREE_EVERY_SECONDS = 0.05  # how often the ranks agree on stopping: a stop lands this late
MOST_ROUNDS_APART = 8  # and this many rounds late at most, however fast the rounds


def train_xgboost(ctx: WorkerContext) -> None:
    hyperparameters = ctx.task.hyperparameters
    assert isinstance(hyperparameters, XGBoostHyperparameters)  # the controller built it
    tracker = dict(ctx.task.rendezvous.xgboost_tracker)
    timeout = math.ceil(ctx.task.rendezvous.collective_timeout_seconds)
    communicator: contextlib.AbstractContextManager[Any] = (
        _Communicator(dmlc_task_id=f"{ctx.rank:06d}", dmlc_timeout=timeout, **tracker)
        if tracker
        else contextlib.nullcontext()
    )
    params = hyperparameters.booster_params(seed=ctx.task.seed, nthread=ctx.threads)
    with communicator:
        matrices = {}
        for name in ("train", "validation", "test"):
            table = ctx.channel(name)
            if table is not None:
                matrices[name] = xgb.DMatrix(
                    table.features,
                    label=table.labels,
                    nthread=ctx.threads,
                    feature_names=list(table.feature_names) if table.feature_names else None,
                )
        evals = [(matrices[name], name) for name in ("train", "validation") if name in matrices]
        booster, start = _booster(ctx, params, [matrices["train"], *(m for m, _ in evals)])
        checkpoints = ctx.checkpoints
        period = sampler_period(
            hyperparameters.samples, None if checkpoints is None else checkpoints.plan.every_steps
        )
        saved = start  # the newest round a checkpoint holds
        agreement = _Agreement(ctx, start, period)
        # xgboost.train's loop, so that a resumed run continues at the same round: with the
        # same data and workers it grows the very trees an uninterrupted run would.
        for round_index in range(start, hyperparameters.num_round):
            if hyperparameters.samples and round_index > start and round_index % period == 0:
                _fresh_samplers(booster)
            booster.update(matrices["train"], iteration=round_index)
            step = round_index + 1
            if evals:
                ctx.report(step, **_parse_eval(booster.eval_set(evals, iteration=round_index)))
            stop, due = agreement.after(step)
            # Only a round whose samplers start fresh can be resumed exactly: a checkpoint
            # due by time waits for the next one; a stop keeps the last one passed.
            whole = step - step % period
            if checkpoints is not None and whole > saved and (stop or (due and whole == step)):
                _save_checkpoint(ctx, booster, whole)
                saved = whole
            if stop:
                break
        if "test" in matrices:  # evaluation is collective: every rank takes part
            ctx.report(
                hyperparameters.num_round, **_parse_eval(booster.eval(matrices["test"], "test"))
            )
    if ctx.is_chief:
        booster.save_model(ctx.model_dir / MODEL_FILE)
        (ctx.model_dir / "hyperparameters.json").write_text(
            json.dumps(hyperparameters.model_dump(mode="json", by_alias=True), indent=2)
        )


class _Communicator(collective.CommunicatorContext):
    """XGBoost's communicator, whose end does not hide why training ended early.

    A worker whose peer was lost (killed, its machine gone) fails in a collective with a
    broken connection, a fault a retry mends. Leaving the communicator then finalizes it, and
    that can fail too (shutting down waits on the lost peer and reports to the tracker, which
    may have gone): raised from `__exit__`, its error ("Failed to shutdown.") would replace the
    training error, and the job would fail as if the program were at fault. So the training
    error goes on; finalize's is only logged."""

    def __exit__(self, *exc_info: Any) -> None:
        try:
            super().__exit__(*exc_info)
        except xgb.core.XGBoostError as error:
            if exc_info[0] is None:  # training ended well: this is the error
                raise
            print(
                f"scaletune: finalizing XGBoost's communicator failed too: {error}",
                file=sys.stderr,
                flush=True,
            )


def _booster(
    ctx: WorkerContext, params: dict[str, object], cache: list[xgb.DMatrix]
) -> tuple[xgb.Booster, int]:
    """A new booster, or the checkpoint's (with the rounds it has) on a resumed attempt."""
    checkpoints = ctx.checkpoints
    if checkpoints is None or checkpoints.resume_step is None:
        return xgb.Booster(params, cache), 0
    saved = checkpoints.load()[CHECKPOINT_FILE]
    booster = xgb.Booster(params, cache, model_file=bytearray(saved))
    return booster, booster.num_boosted_rounds()


class _Agreement:
    """Whether to stop, and whether a checkpoint is due, after a round: the same answer on
    every rank, or the next collective would hang. Agreeing is a collective every rank waits
    in (on a busy machine the wait, not the tiny sum, is its cost), so the ranks agree about
    every `AGREE_EVERY_SECONDS` of training rather than every round: rank 0 times its rounds,
    and the rounds to the next agreement travel in this one (the other ranks add nothing).
    With sampled trees the ranks also agree on each sampling period's round, where a
    checkpoint can be taken. A stop requested lands at the next agreement; a checkpoint due
    by count needs none (every rank counts the same)."""

    def __init__(
        self,
        ctx: WorkerContext,
        start: int,
        period: int,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._ctx = ctx
        self._period = period
        self._clock = clock
        self._next = start + 1  # the first round's end
        self._last = (start, clock())

    def after(self, step: int) -> tuple[bool, bool]:
        ctx, checkpoints = self._ctx, self._ctx.checkpoints
        by_count = checkpoints is not None and checkpoints.step_due(step)
        if step < self._next:
            return False, by_count
        by_time = checkpoints is not None and checkpoints.time_due()
        wanted = np.array(
            [int(ctx.stop_requested()), int(by_time), self._rounds_to_next(step)], dtype=np.int64
        )
        if ctx.world_size > 1:
            wanted = collective.allreduce(wanted, collective.Op.MAX)
        self._next = step + int(wanted[2])
        if self._period > 1:  # and on every sampling period's round, where checkpoints fall
            self._next = min(self._next, (step // self._period + 1) * self._period)
        return bool(wanted[0]), bool(wanted[1]) or by_count

    def _rounds_to_next(self, step: int) -> int:
        """Rank 0's choice, from its rounds since the last agreement (0 from the others)."""
        if not self._ctx.is_chief:
            return 0
        if self._ctx.world_size == 1:
            return 1  # no collective to wait in: every round
        now = self._clock()
        (last_step, last_time), self._last = self._last, (step, now)
        per_round = (now - last_time) / max(step - last_step, 1)
        fits = int(AGREE_EVERY_SECONDS / per_round) if per_round > 0 else MOST_ROUNDS_APART
        return min(max(fits, 1), MOST_ROUNDS_APART)


def sampler_period(samples: bool, every_steps: int | None) -> int:
    """Rounds between fresh samplers when trees grow on sampled rows or columns.

    XGBoost draws a column sampler's seed once per tree updater and keeps drawing from it,
    state its model files leave out; a run resumed at round k would draw other columns. So the
    updaters are built anew every `period` rounds (each draws from the seed and round alone,
    `seed_per_iteration`), and checkpoints fall on those rounds: resuming at one of them grows
    the same trees. A period divides `every_steps`, so checkpoints by count keep their rounds;
    10 rounds (or fewer) keep the cost of rebuilding the updaters near 1 %."""
    if not samples:
        return 1
    multiple = every_steps or SAMPLER_PERIOD
    return max(d for d in range(1, min(SAMPLER_PERIOD, multiple) + 1) if multiple % d == 0)


def _fresh_samplers(booster: xgb.Booster) -> None:
    """Rebuild the booster's tree updaters (XGBoost does on loading a configuration), and with
    them the samplers, as a booster made for a resumed attempt starts."""
    booster.load_config(booster.save_config())


def _save_checkpoint(ctx: WorkerContext, booster: xgb.Booster, step: int) -> None:
    """Rank 0 saves: every rank holds the same booster after each round. A stop between
    sampling periods saves the booster of the last period's first `step` rounds, with its
    reports up to there (the resumed attempt reports the later rounds again)."""
    if ctx.is_chief and ctx.checkpoints is not None:
        rounds = booster.num_boosted_rounds()
        model = booster if rounds == step else booster[:step]
        meta = None if rounds == step else {"reported_step": step}
        ctx.checkpoints.save(step, {CHECKPOINT_FILE: bytes(model.save_raw("ubj"))}, meta)


def _parse_eval(line: str) -> dict[str, float]:
    """'[0]\\ttest-auc:0.78\\ttest-logloss:0.3' -> {'test:auc': 0.78, 'test:logloss': 0.3}."""
    metrics = {}
    for field in line.split("\t")[1:]:
        key, _, value = field.rpartition(":")
        data, _, metric = key.partition("-")
        metrics[f"{data}:{metric}"] = float(value)
    return metrics
