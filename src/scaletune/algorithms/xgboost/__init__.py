"""Built-in distributed XGBoost: rows sharded across workers, histograms all-reduced."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from scaletune.algorithms._base import Algorithm, PreparedData
from scaletune.algorithms._boosting import first_rung_notice
from scaletune.data import Table
from scaletune.data._table import FloatArray
from scaletune.errors import InvalidInputError
from scaletune.spec import (
    ChannelName,
    DistributionStrategy,
    TrainingJobSpec,
    TuningJobSpec,
)
from scaletune.worker import RendezvousNeeds, WorkerProgram

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


def _booster(model_dir: Path) -> Any:
    import xgboost

    from ._program import MODEL_FILE

    return xgboost.Booster(model_file=str(model_dir / MODEL_FILE))


class XGBoostAlgorithm(Algorithm):
    name: ClassVar[str] = "xgboost"
    hyperparameters_type: ClassVar[type[BaseModel]] = XGBoostHyperparameters
    steps_hyperparameter: ClassVar[str | None] = "num_round"
    step_name: ClassVar[str] = "boosting round"
    predicts: ClassVar[bool] = True

    def rendezvous_needs(self, spec: TrainingJobSpec) -> RendezvousNeeds:
        return RendezvousNeeds(collective_tracker=True)  # histograms all-reduced through it

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

    def save_mlflow_model(self, model_dir: Path, target: Path) -> bool:
        import mlflow.xgboost
        import xgboost

        from ._program import MODEL_FILE

        booster = xgboost.Booster(model_file=str(model_dir / MODEL_FILE))
        mlflow.xgboost.save_model(
            booster, str(target), pip_requirements=[f"xgboost=={xgboost.__version__}"]
        )
        return True

    def tuning_notices(self, spec: TuningJobSpec) -> list[str]:
        return first_rung_notice(spec, "eta")

    def model_width(self, model_dir: Path) -> int:
        return int(_booster(model_dir).num_features())

    def predict(self, model_dir: Path, features: FloatArray, threads: int) -> FloatArray:
        import xgboost

        booster = _booster(model_dir)
        booster.set_param({"nthread": threads})
        quantizer = model_dir / "quantizer.json"
        if quantizer.exists():  # the bins it trained on
            features = Quantizer.from_json(quantizer.read_text()).transform(features)
        rows = xgboost.DMatrix(features, feature_names=booster.feature_names, nthread=threads)
        predicted: FloatArray = booster.predict(rows).astype(np.float32)
        return predicted

    @property
    def program(self) -> WorkerProgram:
        from ._program import train_xgboost  # xgboost itself: only where a job runs

        return train_xgboost
