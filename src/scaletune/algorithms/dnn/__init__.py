"""Built-in data-parallel image classifier (PyTorch): all-reduce or a parameter server."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

# Creating a torch optimiser creates TorchInductor's cache folder, by default in the temp dir
# where it would outlive every job: keep it with scaletune's other caches instead.
os.environ.setdefault(
    "TORCHINDUCTOR_CACHE_DIR",
    str(Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "scaletune" / "torch"),
)

import numpy as np
from pydantic import BaseModel

from scaletune.algorithms._base import Algorithm, PreparedData
from scaletune.data import Table
from scaletune.data._table import FloatArray
from scaletune.errors import InvalidInputError
from scaletune.gradient_noise import GradientNoiseScale
from scaletune.spec import (
    ChannelName,
    DistributionStrategy,
    StalenessCompensation,
    SyncMode,
    TrainingJobSpec,
)
from scaletune.worker import WorkerProgram

from ._hyperparameters import (
    Architecture,
    DNNHyperparameters,
    LearningRateScaling,
    OptimizerName,
)
from ._model import CONFIG_FILE, WEIGHTS_FILE, ModelConfig, build_model, image_side_of, load_model
from ._program import train_dnn
from ._schedule import LearningRateSchedule

__all__ = [
    "CONFIG_FILE",
    "WEIGHTS_FILE",
    "Architecture",
    "DNNAlgorithm",
    "DNNHyperparameters",
    "GradientNoiseScale",
    "LearningRateScaling",
    "LearningRateSchedule",
    "ModelConfig",
    "OptimizerName",
    "build_model",
    "load_model",
]


class DNNAlgorithm(Algorithm):
    name: ClassVar[str] = "dnn"
    hyperparameters_type: ClassVar[type[BaseModel]] = DNNHyperparameters
    steps_hyperparameter: ClassVar[str | None] = "epochs"
    step_name: ClassVar[str] = "epoch"
    checkpoints_per_worker: ClassVar[bool] = True  # each worker's place in its shard
    predicts: ClassVar[bool] = True
    takes_backup_workers: ClassVar[bool] = True

    def check_job(self, spec: TrainingJobSpec, hyperparameters: BaseModel) -> None:
        distribution = spec.distribution
        parameter_server = distribution.strategy is DistributionStrategy.PARAMETER_SERVER
        if distribution.mode is SyncMode.ASYNC and not parameter_server:
            raise InvalidInputError(
                "distribution.mode='async' needs distribution.strategy='parameter_server' "
                f"(got {distribution.strategy.value!r}); all-reduce is always synchronous"
            )
        if distribution.max_staleness is not None and distribution.mode is not SyncMode.ASYNC:
            raise InvalidInputError(
                f"distribution.max_staleness={distribution.max_staleness} applies to "
                "distribution.mode='async' only (the parameter server's; all-reduce is "
                "synchronous)"
            )
        compensation = distribution.staleness_compensation
        explicit = compensation not in (StalenessCompensation.NONE, StalenessCompensation.AUTO)
        if explicit and not distribution.applies_asynchronously:
            raise InvalidInputError(
                f"distribution.staleness_compensation={compensation.value!r} applies to "
                "distribution.mode='async' only (max_staleness = 0 is synchronous)"
            )
        assert isinstance(hyperparameters, DNNHyperparameters)
        _check_backup_workers(spec, hyperparameters)
        if (
            hyperparameters.lr_scaling is LearningRateScaling.ADASCALE
            and distribution.mode is SyncMode.ASYNC
        ):
            raise InvalidInputError(
                "hyperparameters.lr_scaling='adascale' needs synchronous updates (all-reduce "
                "or distribution.mode='sync'); an asynchronous server has "
                "distribution.implicit_momentum and distribution.staleness_compensation"
            )

    def prepare_data(
        self, hyperparameters: BaseModel, tables: Mapping[ChannelName, Table]
    ) -> PreparedData:
        assert isinstance(hyperparameters, DNNHyperparameters)
        largest = -1
        for name, table in tables.items():
            labels = table.labels
            if len(labels) and (
                not np.all(np.isfinite(labels))
                or np.any(labels < 0)
                or np.any(labels != np.round(labels))
            ):
                bad = next(value for value in labels if not (value >= 0 and value == round(value)))
                raise InvalidInputError(
                    f"channel {name.value!r} ({table.source}) has label {bad:g}; class labels "
                    "must be whole numbers 0, 1, 2, ..."
                )
            if len(labels):
                largest = max(largest, int(labels.max()))
        classes = hyperparameters.num_classes
        if classes is None:
            classes = max(largest + 1, 2)
        elif largest >= classes:
            raise InvalidInputError(
                f"hyperparameters.num_classes={classes} but the data has label {largest}"
            )
        n_features = tables[ChannelName.TRAIN].n_features
        if hyperparameters.model is Architecture.CNN and image_side_of(n_features) is None:
            raise InvalidInputError(
                f"hyperparameters.model='cnn' reads each row as a square image, but rows have "
                f"{n_features} features (not a square number); use model='mlp'"
            )
        completed = hyperparameters.model_copy(update={"num_classes": classes})
        return PreparedData(tables, hyperparameters=completed)

    def reported_metrics(
        self, spec: TrainingJobSpec, hyperparameters: BaseModel
    ) -> frozenset[str] | None:
        metrics = {"train:loss"}
        if ChannelName.VALIDATION in spec.channels:
            metrics |= {"validation:loss", "validation:accuracy"}
        return frozenset(metrics)

    def full_resource(self, hyperparameters: BaseModel) -> int | None:
        assert isinstance(hyperparameters, DNNHyperparameters)
        return hyperparameters.epochs

    def examples_per_worker_step(self, hyperparameters: Mapping[str, object]) -> int | None:
        settings = DNNHyperparameters.model_validate(dict(hyperparameters))
        return settings.batch_size * settings.gradient_accumulation_steps

    def save_mlflow_model(self, model_dir: Path, target: Path) -> bool:
        import mlflow.pytorch
        import torch

        mlflow.pytorch.save_model(
            load_model(model_dir),
            str(target),
            pip_requirements=[f"torch=={torch.__version__.split('+')[0]}"],
        )
        return True

    def model_width(self, model_dir: Path) -> int:
        return int(json.loads((model_dir / CONFIG_FILE).read_text())["n_features"])

    def predict(self, model_dir: Path, features: FloatArray, threads: int) -> FloatArray:
        import torch

        model = load_model(model_dir)
        previous = torch.get_num_threads()  # the caller's, given back: this may be its process
        torch.set_num_threads(threads)
        try:
            with torch.no_grad():
                logits = model(torch.from_numpy(np.require(features, np.float32, ["C", "W"])))
        finally:
            torch.set_num_threads(previous)
        predicted: FloatArray = torch.softmax(logits, dim=1).numpy()
        return predicted

    @property
    def program(self) -> WorkerProgram:
        return train_dnn


def _check_backup_workers(spec: TrainingJobSpec, hyperparameters: DNNHyperparameters) -> None:
    backup = spec.distribution.backup_workers
    if backup == 0:
        return
    if spec.distribution.applies_asynchronously:
        raise InvalidInputError(
            f"distribution.backup_workers={backup} applies to synchronous rounds "
            "(distribution.mode='sync'); an asynchronous server waits for no one"
        )
    if spec.elastic and spec.distribution.strategy is DistributionStrategy.ALLREDUCE:
        raise InvalidInputError(
            f"distribution.backup_workers={backup} with an elastic job (instance_count = "
            "{ min, max }): rounds that drop gradients skip rows, which an elastic job's "
            "resizes account for one by one; use a fixed instance_count"
        )
    fewest = spec.min_workers
    if backup >= fewest:
        raise InvalidInputError(
            f"distribution.backup_workers={backup} must be less than the job's "
            f"{'fewest ' if spec.elastic else ''}workers ({fewest}): a round needs one "
            "gradient at least"
        )
    if hyperparameters.lr_scaling is LearningRateScaling.ADASCALE:
        raise InvalidInputError(
            f"distribution.backup_workers={backup} with hyperparameters.lr_scaling='adascale': "
            "AdaScale measures its gain on whole rounds; use a fixed scaling rule"
        )
