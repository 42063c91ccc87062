"""A user's own training program as a training job: launched once per worker with the
environment data-parallel frameworks expect; metrics from `scaletune.report()` or regexes."""

from __future__ import annotations

from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from scaletune.algorithms._base import Algorithm
from scaletune.errors import InvalidInputError
from scaletune.spec import TrainingJobSpec
from scaletune.worker import RendezvousNeeds, WorkerProgram

from ._program import run_script


class ScriptHyperparameters(BaseModel):
    """Whatever the script takes: passed on as `--name value` and as a JSON file."""

    model_config = ConfigDict(frozen=True, extra="allow")


class ScriptAlgorithm(Algorithm):
    name: ClassVar[str] = "script"
    hyperparameters_type: ClassVar[type[BaseModel]] = ScriptHyperparameters
    needs_train_channel: ClassVar[bool] = False  # a script may read its data itself
    takes_script: ClassVar[bool] = True

    def check_inputs(self, spec: TrainingJobSpec) -> None:
        if spec.script is None:
            raise InvalidInputError("algorithm 'script' needs a [script] table with entry_point")
        super().check_inputs(spec)

    def rendezvous_needs(self, spec: TrainingJobSpec) -> RendezvousNeeds:
        # Each rank's address on its own node: TF_CONFIG's cluster.
        tracker = spec.script is not None and spec.script.xgboost_tracker
        return RendezvousNeeds(collective_tracker=tracker, worker_addresses=True)

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
