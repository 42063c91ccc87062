"""What each XGBoost worker runs: row-sharded training with histogram all-reduce."""

from __future__ import annotations

import contextlib
import json
import os
from typing import Any

import numpy as np
import xgboost as xgb
from xgboost import collective

from scaletune.worker import WorkerContext

from ._hyperparameters import XGBoostHyperparameters

MODEL_FILE = "xgboost-model.json"


def train_xgboost(ctx: WorkerContext) -> None:
    hyperparameters = ctx.task.hyperparameters
    assert isinstance(hyperparameters, XGBoostHyperparameters)  # the controller built it
    tracker = dict(ctx.task.rendezvous.xgboost_tracker)
    communicator: contextlib.AbstractContextManager[Any] = (
        collective.CommunicatorContext(dmlc_task_id=f"{ctx.rank:06d}", **tracker)
        if tracker
        else contextlib.nullcontext()
    )
    nthread = max(1, (os.cpu_count() or 1) // ctx.world_size)
    params = hyperparameters.booster_params(seed=ctx.task.seed, nthread=nthread)
    with communicator:
        matrices = {}
        for name in ("train", "validation", "test"):
            table = ctx.channel(name)
            if table is not None:
                matrices[name] = xgb.DMatrix(
                    table.features,
                    label=table.labels,
                    nthread=nthread,
                    feature_names=list(table.feature_names) if table.feature_names else None,
                )
        evals = [(matrices[name], name) for name in ("train", "validation") if name in matrices]
        booster = xgb.train(
            params,
            matrices["train"],
            num_boost_round=hyperparameters.num_round,
            evals=evals,
            verbose_eval=False,
            callbacks=[_ReportEachRound(ctx)],
        )
        if "test" in matrices:  # evaluation is collective: every rank takes part
            ctx.report(
                hyperparameters.num_round, **_parse_eval(booster.eval(matrices["test"], "test"))
            )
    if ctx.is_chief:
        booster.save_model(ctx.model_dir / MODEL_FILE)
        (ctx.model_dir / "hyperparameters.json").write_text(
            json.dumps(hyperparameters.model_dump(mode="json", by_alias=True), indent=2)
        )


def _parse_eval(line: str) -> dict[str, float]:
    """'[0]\\ttest-auc:0.78\\ttest-logloss:0.3' -> {'test:auc': 0.78, 'test:logloss': 0.3}."""
    metrics = {}
    for field in line.split("\t")[1:]:
        key, _, value = field.rpartition(":")
        data, _, metric = key.partition("-")
        metrics[f"{data}:{metric}"] = float(value)
    return metrics


class _ReportEachRound(xgb.callback.TrainingCallback):
    """Rank 0 reports every round's train and validation metrics (step = round)."""

    def __init__(self, ctx: WorkerContext) -> None:
        super().__init__()
        self._ctx = ctx

    def after_iteration(
        self,
        model: Any,
        epoch: int,
        evals_log: dict[str, dict[str, list[float] | list[tuple[float, float]]]],
    ) -> bool:
        # Entries are (mean, std) pairs only under cross-validation, which workers never run.
        metrics = {
            f"{data}:{metric}": float(values[-1])  # type: ignore[arg-type]
            for data, by_metric in evals_log.items()
            for metric, values in by_metric.items()
        }
        self._ctx.report(epoch + 1, **metrics)
        return self._stop_agreed()

    def _stop_agreed(self) -> bool:
        """Every rank must stop at the same round, or the next collective would hang."""
        wanted = self._ctx.stop_requested()
        if self._ctx.world_size == 1:
            return wanted
        agreed = collective.allreduce(np.array([int(wanted)], dtype=np.int32), collective.Op.MAX)
        return bool(agreed[0])
