"""Built-in distributed XGBoost: rows sharded across workers, histograms all-reduced."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar

from pydantic import BaseModel

from scaletune.algorithms._base import Algorithm, PreparedData
from scaletune.data import Table
from scaletune.errors import InvalidInputError
from scaletune.spec import ChannelName, DistributionStrategy, TrainingJobSpec
from scaletune.worker import WorkerProgram

from ._hyperparameters import (
    REFERENCE_HYPERPARAMETERS,
    Objective,
    TreeMethod,
    XGBoostHyperparameters,
)
from ._prepare import Quantizer, check_labels, quantize

__all__ = [
    "REFERENCE_HYPERPARAMETERS",
    "Objective",
    "Quantizer",
    "TreeMethod",
    "XGBoostAlgorithm",
    "XGBoostHyperparameters",
]


class XGBoostAlgorithm(Algorithm):
    hyperparameters_type: ClassVar[type[BaseModel]] = XGBoostHyperparameters
    needs_xgboost_tracker: ClassVar[bool] = True
    steps_hyperparameter: ClassVar[str | None] = "num_round"

    def check_job(self, spec: TrainingJobSpec, hyperparameters: BaseModel) -> None:
        assert isinstance(hyperparameters, XGBoostHyperparameters)
        if spec.distribution.strategy is not DistributionStrategy.ALLREDUCE:
            raise InvalidInputError(
                f"distribution.strategy={spec.distribution.strategy.value!r}: xgboost trains "
                "with 'allreduce' (histogram all-reduce) only"
            )
        if hyperparameters.tree_method is TreeMethod.EXACT and spec.instance_count > 1:
            raise InvalidInputError(
                "hyperparameters.tree_method='exact' does not support distributed training "
                f"(instance_count={spec.instance_count}): rows are split across workers; "
                "use 'hist' or 'approx'"
            )
        if hyperparameters.objective.is_multiclass and hyperparameters.num_class is None:
            raise InvalidInputError(
                f"hyperparameters.objective={hyperparameters.objective.value!r} needs "
                "hyperparameters.num_class"
            )

    def prepare_data(
        self, hyperparameters: BaseModel, tables: Mapping[ChannelName, Table]
    ) -> PreparedData:
        assert isinstance(hyperparameters, XGBoostHyperparameters)
        check_labels(hyperparameters, tables)
        if not hyperparameters.quantize_features:
            return PreparedData(tables)
        binned, quantizer = quantize(tables, hyperparameters.max_bin)
        return PreparedData(binned, {"quantizer.json": quantizer.to_json()})

    def reported_metrics(
        self, spec: TrainingJobSpec, hyperparameters: BaseModel
    ) -> frozenset[str] | None:
        assert isinstance(hyperparameters, XGBoostHyperparameters)
        metrics = hyperparameters.eval_metric or [hyperparameters.objective.default_metric]
        sets = [
            name.value
            for name in (ChannelName.TRAIN, ChannelName.VALIDATION)
            if name in spec.channels
        ]
        return frozenset(f"{data}:{metric}" for data in sets for metric in metrics)

    def full_resource(self, hyperparameters: BaseModel) -> int | None:
        assert isinstance(hyperparameters, XGBoostHyperparameters)
        return hyperparameters.num_round

    @property
    def program(self) -> WorkerProgram:
        from ._program import train_xgboost  # xgboost itself: only where a job runs

        return train_xgboost
