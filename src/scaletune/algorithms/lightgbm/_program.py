"""What each LightGBM worker runs: its shard of the rows, trees grown data-parallel over
LightGBM's own network (`tree_learner = "data"`: histograms reduced across the machines
list the rendezvous gave, each rank at its own address), and every few rounds an agreement
on stopping and checkpoints through XGBoost's collective (LightGBM's network has no call
for it)."""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import lightgbm as lgb
import numpy as np

from scaletune.algorithms._collective import Agreement, communicator
from scaletune.data import Table
from scaletune.worker import WorkerContext

from ._hyperparameters import LightGBMHyperparameters

MODEL_FILE = "lightgbm-model.txt"
CHECKPOINT_FILE = "booster.txt"
BIN_SAMPLE_ROWS = 200_000  # LightGBM's own bin_construct_sample_cnt
BIN_SAMPLE_BLOCKS = 16


def train_lightgbm(ctx: WorkerContext) -> None:
    hyperparameters = ctx.task.hyperparameters
    assert isinstance(hyperparameters, LightGBMHyperparameters)  # the controller built it
    local = hyperparameters.booster_params(seed=ctx.task.seed, num_threads=ctx.threads)
    bins = _bins(ctx, local)  # before the network: found from the whole channel, here
    params = {**local, **network_params(ctx)}
    train = _dataset(ctx.channel("train"), params, reference=bins)
    assert train is not None  # the algorithm's check: a train channel
    valid = {
        name: dataset
        for name in ("validation",)
        if (dataset := _dataset(ctx.channel(name), params, reference=train)) is not None
    }
    start, booster = _resume_point(ctx)
    rounds = hyperparameters.num_boost_round
    with communicator(ctx), _network_freed(ctx):
        # A checkpoint of the last round (its attempt failed after it) leaves none to grow.
        if booster is None or start < rounds:
            booster = lgb.train(
                params,
                train,
                num_boost_round=rounds - start,
                valid_sets=list(valid.values()),
                valid_names=list(valid),
                init_model=booster,
                keep_training_booster=True,
                callbacks=[_Reports(ctx, Agreement(ctx, start, period=1))],
            )
    test = ctx.channel("test")  # replicated: every rank scores it alike, rank 0 reports
    if test is not None:
        ctx.report(rounds, **_scores(booster, test, local, "test"))
    if ctx.is_chief:
        booster.save_model(str(ctx.model_dir / MODEL_FILE), num_iteration=-1)
        (ctx.model_dir / "hyperparameters.json").write_text(
            json.dumps(hyperparameters.model_dump(mode="json"), indent=2)
        )


def network_params(ctx: WorkerContext) -> dict[str, object]:
    """LightGBM's data-parallel settings: every rank's address, in rank order, and its own
    port (LightGBM finds its rank by it); none on one worker."""
    if ctx.world_size == 1:
        return {}
    machines = ctx.task.rendezvous.worker_addresses
    minutes = math.ceil(ctx.task.rendezvous.collective_timeout_seconds / 60)
    return {
        "tree_learner": "data",
        "num_machines": ctx.world_size,
        "machines": ",".join(machines),
        "local_listen_port": int(machines[ctx.rank].rpartition(":")[2]),
        "time_out": max(minutes, 1),  # a peer silent this long fails the round (minutes)
        "pre_partition": True,  # each rank holds its shard: LightGBM splits nothing again
    }


def _bins(ctx: WorkerContext, params: dict[str, object]) -> lgb.Dataset:
    """The train channel's bins, as one machine finds them: from all its rows (or LightGBM's
    sample of 200,000, spread over the channel), the same on every rank and at every size.
    Left to LightGBM's distributed loading, each feature's bins would come from the rows of
    one rank's shard alone, and a model would depend on how many workers trained it."""
    shard = ctx.task.channels["train"]
    total = shard.n_rows()
    if total <= BIN_SAMPLE_ROWS:
        sample = shard.files.read_rows(0, total).features
    else:  # evenly spaced blocks: a few reads, wherever the channel lives
        block = BIN_SAMPLE_ROWS // BIN_SAMPLE_BLOCKS
        starts = np.linspace(0, total - block, BIN_SAMPLE_BLOCKS).astype(int)
        sample = np.concatenate([shard.files.read_rows(s, s + block).features for s in starts])
    return lgb.Dataset(
        sample,
        feature_name=_feature_names(shard.files.feature_names),
        params=_dataset_params(params),
        free_raw_data=True,
    ).construct()


def _feature_names(names: tuple[str, ...] | None) -> list[str] | Literal["auto"]:
    return list(names) if names else "auto"


def _dataset_params(params: dict[str, object]) -> dict[str, object]:
    """What LightGBM reads from a Dataset's own parameters as it bins features."""
    return {name: params[name] for name in ("max_bin", "min_data_in_leaf", "verbosity")}


def _dataset(
    table: Table | None, params: dict[str, object], reference: lgb.Dataset | None = None
) -> lgb.Dataset | None:
    if table is None:
        return None
    return lgb.Dataset(
        table.features,
        label=table.labels,
        feature_name=_feature_names(table.feature_names),
        reference=reference,
        params=_dataset_params(params),
        free_raw_data=False,
    )


def _scores(
    booster: lgb.Booster, table: Table, params: dict[str, object], name: str
) -> dict[str, float]:
    """The model's metrics on `table`, LightGBM's own: its raw scores start a booster of no
    trees over the rows, which evaluates them as its training data (no network, and no
    training set of the model's needed: a model loaded from a checkpoint has none)."""
    scored = lgb.Dataset(
        table.features,
        label=table.labels,
        init_score=booster.predict(table.features, raw_score=True),
        params=_dataset_params(params),
    )
    scorer = lgb.Booster(params=params, train_set=scored)
    scorer.set_train_data_name(name)
    return _metrics(scorer.eval_train())


def _resume_point(ctx: WorkerContext) -> tuple[int, lgb.Booster | None]:
    """Round 0 and no model, or the checkpoint's model and the rounds it holds."""
    checkpoints = ctx.checkpoints
    if checkpoints is None or checkpoints.resume_step is None:
        return 0, None
    saved = checkpoints.load()[CHECKPOINT_FILE]
    booster = lgb.Booster(model_str=saved.decode())
    return booster.current_iteration(), booster


class _Reports:
    """The callback after each round: its metrics reported, and, when the ranks have agreed,
    a checkpoint saved or the training stopped (every rank at the same round, or the next
    round's reduction would wait for a rank that left)."""

    order = 30  # after LightGBM's own evaluation

    def __init__(self, ctx: WorkerContext, agreement: Agreement) -> None:
        self.ctx, self.agreement = ctx, agreement

    def __call__(self, env: lgb.callback.CallbackEnv) -> None:
        step = env.iteration + 1  # rounds so far, the checkpoint's included
        if env.evaluation_result_list:
            self.ctx.report(step, **_metrics(env.evaluation_result_list))
        stop, due = self.agreement.after(step)
        checkpoints = self.ctx.checkpoints
        if checkpoints is not None and (due or stop) and not self.ctx.is_chief:
            checkpoints.saved_by_another_rank()
        elif checkpoints is not None and (due or stop):
            model = env.model.model_to_string(num_iteration=-1).encode()
            checkpoints.save(step, {CHECKPOINT_FILE: model})
        if stop:
            raise lgb.callback.EarlyStopException(env.iteration, env.evaluation_result_list or [])


def _metrics(results: list[Any]) -> dict[str, float]:
    """LightGBM's (data, metric, value, higher better[, stdv]) -> {'data:metric': value}."""
    return {f"{data}:{metric}": float(value) for data, metric, value, *_ in results}


@contextmanager
def _network_freed(ctx: WorkerContext) -> Iterator[None]:
    """LightGBM's network is the process's: freed when the job ends, however it ends, so a
    warm worker's next job sets up its own."""
    try:
        yield
    finally:
        if ctx.world_size > 1:
            from lightgbm import basic

            basic._safe_call(basic._LIB.LGBM_NetworkFree())  # type: ignore[attr-defined]
