"""What each XGBoost worker runs: row-sharded training with histogram all-reduce."""

from __future__ import annotations

import json

import xgboost as xgb

from scaletune.algorithms._collective import Agreement, communicator
from scaletune.worker import WorkerContext

from ._hyperparameters import XGBoostHyperparameters

MODEL_FILE = "xgboost-model.json"
CHECKPOINT_FILE = "booster.ubj"  # binary JSON: every float exactly as trained
SAMPLER_PERIOD = 10  # rounds, at most, between fresh samplers (see sampler_period)


def train_xgboost(ctx: WorkerContext) -> None:
    hyperparameters = ctx.task.hyperparameters
    assert isinstance(hyperparameters, XGBoostHyperparameters)  # the controller built it
    params = hyperparameters.booster_params(seed=ctx.task.seed, nthread=ctx.threads)
    with communicator(ctx):
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
        agreement = Agreement(ctx, start, period)
        stop_at: int | None = None  # the round to stop after, once a stop is agreed
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
            if stop and stop_at is None:
                # A stop the job goes on from (a resize, a notice, a pause) trains on to the
                # sampling period's end, so that its checkpoint holds every round reported.
                end = min(step + -step % period, hyperparameters.num_round)
                stop_at = end if agreement.goes_on else step
            ending = stop_at is not None and step >= stop_at
            # Only a round whose samplers start fresh can be resumed exactly: a checkpoint
            # due by time waits for the next one; a stop keeps the last one passed.
            whole = step - step % period
            if checkpoints is not None and whole > saved and (ending or (due and whole == step)):
                _save_checkpoint(ctx, booster, whole)
                saved = whole
            if ending:
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
    if ctx.checkpoints is not None and not ctx.is_chief:
        ctx.checkpoints.saved_by_another_rank()
    elif ctx.checkpoints is not None:
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
