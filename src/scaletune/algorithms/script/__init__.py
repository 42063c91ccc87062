"""A user's own training program as a training job: launched once per worker with the
environment data-parallel frameworks expect; metrics from `scaletune.report()` or regexes."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from scaletune.algorithms._base import Algorithm
from scaletune.spec import TrainingJobSpec
from scaletune.worker import WorkerProgram

from ._program import run_script


class ScriptHyperparameters(BaseModel):
    """Whatever the script takes: passed on as `--name value` and as a JSON file."""

    model_config = ConfigDict(frozen=True, extra="allow")


class ScriptAlgorithm(Algorithm):
    hyperparameters_type: ClassVar[type[BaseModel]] = ScriptHyperparameters

    def wants_xgboost_tracker(self, spec: TrainingJobSpec) -> bool:
        return spec.script is not None and spec.script.xgboost_tracker

    def hyperparameter_names(self) -> frozenset[str] | None:
        return None

    def reported_metrics(
        self, spec: TrainingJobSpec, hyperparameters: BaseModel
    ) -> frozenset[str] | None:
        return None  # scaletune.report() may send any name

    @property
    def program(self) -> WorkerProgram:
        return run_script


__all__ = ["ScriptAlgorithm", "ScriptHyperparameters"]
