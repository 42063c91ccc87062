"""What each XGBoost worker runs: row-sharded training with histogram all-reduce."""

from __future__ import annotations

import contextlib
import json
import math
import sys
from typing import Any

import numpy as np
import xgboost as xgb
from xgboost import collective

from scaletune.worker import WorkerContext

from ._hyperparameters import XGBoostHyperparameters

MODEL_FILE = "xgboost-model.json"
CHECKPOINT_FILE = "booster.ubj"  # binary JSON: every float exactly as trained
SAMPLER_PERIOD = 10  # rounds, at most, between fresh samplers (see sampler_period)


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
        # xgboost.train's loop, so that a resumed run continues at the same round: with the
        # same data and workers it grows the very trees an uninterrupted run would.
        for round_index in range(start, hyperparameters.num_round):
            if hyperparameters.samples and round_index > start and round_index % period == 0:
                _fresh_samplers(booster)
            booster.update(matrices["train"], iteration=round_index)
            step = round_index + 1
            if evals:
                ctx.report(step, **_parse_eval(booster.eval_set(evals, iteration=round_index)))
            stop, due = _agree(ctx, step)
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


def _agree(ctx: WorkerContext, step: int) -> tuple[bool, bool]:
    """Whether to stop, and whether a checkpoint is due, after this round: the same answer on
    every rank (one tiny all-reduce), or the next collective would hang."""
    checkpoints = ctx.checkpoints
    by_time = checkpoints is not None and checkpoints.time_due()
    wanted = np.array([int(ctx.stop_requested()), int(by_time)], dtype=np.int32)
    if ctx.world_size > 1:
        wanted = collective.allreduce(wanted, collective.Op.MAX)
    by_count = checkpoints is not None and checkpoints.step_due(step)
    return bool(wanted[0]), bool(wanted[1]) or by_count


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
