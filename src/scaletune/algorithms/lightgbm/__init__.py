"""Built-in distributed LightGBM: rows sharded across workers, trees grown data-parallel over
LightGBM's own network. Added through the `Algorithm` interface alone, as a plug-in would be
(docs/guides/algorithms.md walks through it)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
from pydantic import BaseModel

from scaletune.algorithms._base import Algorithm, PreparedData
from scaletune.algorithms._boosting import first_rung_notice, refuse_labels
from scaletune.data import Table
from scaletune.data._table import FloatArray
from scaletune.errors import InvalidInputError
from scaletune.spec import (
    ChannelName,
    DistributionStrategy,
    ShardingMode,
    TrainingJobSpec,
    TuningJobSpec,
)
from scaletune.worker import RendezvousNeeds, WorkerProgram

from ._hyperparameters import (
    BANK_MARKETING_HYPERPARAMETERS,
    METRICS,
    LightGBMHyperparameters,
    Objective,
)

__all__ = [
    "BANK_MARKETING_HYPERPARAMETERS",
    "METRICS",
    "LightGBMAlgorithm",
    "LightGBMHyperparameters",
    "Objective",
]


def _booster(model_dir: Path) -> Any:
    import lightgbm

    from ._program import MODEL_FILE

    return lightgbm.Booster(model_file=str(model_dir / MODEL_FILE))


class LightGBMAlgorithm(Algorithm):
    name: ClassVar[str] = "lightgbm"
    hyperparameters_type: ClassVar[type[BaseModel]] = LightGBMHyperparameters
    steps_hyperparameter: ClassVar[str | None] = "num_boost_round"
    step_name: ClassVar[str] = "boosting round"
    predicts: ClassVar[bool] = True

    def rendezvous_needs(self, spec: TrainingJobSpec) -> RendezvousNeeds:
        # Each rank's own address for LightGBM's machines list; XGBoost's collective, in
        # which the ranks agree on stopping and checkpoints.
        return RendezvousNeeds(collective_tracker=True, worker_addresses=True)

    def check_job(self, spec: TrainingJobSpec, hyperparameters: BaseModel) -> None:
        assert isinstance(hyperparameters, LightGBMHyperparameters)
        if spec.distribution.strategy is not DistributionStrategy.ALLREDUCE:
            raise InvalidInputError(
                f"distribution.strategy={spec.distribution.strategy.value!r}: lightgbm trains "
                "data-parallel ('allreduce': histograms reduced over its own network) only"
            )
        for name in (ChannelName.VALIDATION, ChannelName.TEST):
            if name in spec.channels and spec.sharding(name) is ShardingMode.SHARDED:
                raise InvalidInputError(
                    f"channels.{name.value}.distribution='sharded': LightGBM scores it on "
                    "each worker alone, so each needs all of it ('replicated')"
                )
        if hyperparameters.objective.is_multiclass and hyperparameters.num_class is None:
            raise InvalidInputError(
                f"hyperparameters.objective={hyperparameters.objective.value!r} needs "
                "hyperparameters.num_class"
            )

    def prepare_data(
        self, hyperparameters: BaseModel, tables: Mapping[ChannelName, Table]
    ) -> PreparedData:
        assert isinstance(hyperparameters, LightGBMHyperparameters)
        objective = hyperparameters.objective
        for name, table in tables.items():
            labels = table.labels
            if objective.is_binary:
                bad, wanted = ~np.isin(labels, (0.0, 1.0)), "0 or 1"
            elif objective.is_multiclass:
                classes = hyperparameters.num_class or 0
                bad = (labels != np.round(labels)) | (labels < 0) | (labels >= classes)
                wanted = f"an integer in [0, {classes - 1}]"
            elif objective is Objective.POISSON:
                bad, wanted = labels < 0, "non-negative"
            else:
                continue
            refuse_labels(name, table, bad, wanted, objective.value)
        return PreparedData(tables)

    def reported_metrics(
        self, spec: TrainingJobSpec, hyperparameters: BaseModel
    ) -> frozenset[str] | None:
        assert isinstance(hyperparameters, LightGBMHyperparameters)
        # The validation channel's, whole on every rank. Not the train channel's: each rank
        # would score its own shard, and what a job reports must not depend on its size.
        if ChannelName.VALIDATION not in spec.channels:
            return frozenset()
        return frozenset(f"validation:{metric}" for metric in hyperparameters.metrics)

    def full_resource(self, hyperparameters: BaseModel) -> int | None:
        assert isinstance(hyperparameters, LightGBMHyperparameters)
        return hyperparameters.num_boost_round

    def save_mlflow_model(self, model_dir: Path, target: Path) -> bool:
        import lightgbm
        import mlflow.lightgbm

        from ._program import MODEL_FILE

        booster = lightgbm.Booster(model_file=str(model_dir / MODEL_FILE))
        mlflow.lightgbm.save_model(
            booster, str(target), pip_requirements=[f"lightgbm=={lightgbm.__version__}"]
        )
        return True

    def tuning_notices(self, spec: TuningJobSpec) -> list[str]:
        return first_rung_notice(spec, "learning_rate")

    def model_width(self, model_dir: Path) -> int:
        return int(_booster(model_dir).num_feature())

    def predict(self, model_dir: Path, features: FloatArray, threads: int) -> FloatArray:
        predicted: FloatArray = np.asarray(
            _booster(model_dir).predict(features, num_threads=threads), dtype=np.float32
        )
        return predicted

    @property
    def program(self) -> WorkerProgram:
        from ._program import train_lightgbm  # lightgbm itself: only where a job runs

        return train_lightgbm
