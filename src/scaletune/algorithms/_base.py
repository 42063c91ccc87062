"""What a built-in algorithm provides: its hyperparameters, checks, data preparation, program."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ValidationError

from scaletune.errors import InvalidInputError

if TYPE_CHECKING:
    from scaletune.data import Table
    from scaletune.spec import ChannelName, TrainingJobSpec
    from scaletune.worker import WorkerProgram


@dataclass(frozen=True)
class PreparedData:
    """Tables as the workers will read them, plus files to publish beside the model, and the
    hyperparameters completed from the data (a class count), where the algorithm needs that."""

    tables: Mapping[ChannelName, Table]
    artifact_files: Mapping[str, bytes] = field(default_factory=dict)
    hyperparameters: BaseModel | None = None


class Algorithm(ABC):
    hyperparameters_type: ClassVar[type[BaseModel]]
    needs_xgboost_tracker: ClassVar[bool] = False
    # The hyperparameter that sets how many steps a job runs (rounds, epochs), where there is one.
    steps_hyperparameter: ClassVar[str | None] = None

    def wants_xgboost_tracker(self, spec: TrainingJobSpec) -> bool:
        """Whether the controller starts XGBoost's tracker for this job's workers."""
        return self.needs_xgboost_tracker

    def parse_hyperparameters(self, raw: Mapping[str, Any]) -> BaseModel:
        from scaletune.spec import describe_validation_error

        try:
            return self.hyperparameters_type.model_validate(dict(raw))
        except ValidationError as exc:
            raise InvalidInputError(_prefixed(describe_validation_error(exc))) from None

    def check(self, spec: TrainingJobSpec) -> None:
        """Refuse a job this algorithm cannot run, naming the bad value."""
        self.check_job(spec, self.parse_hyperparameters(spec.hyperparameters))

    def check_job(self, spec: TrainingJobSpec, hyperparameters: BaseModel) -> None:  # noqa: B027
        """Checks across spec and hyperparameters; none by default."""

    def prepare_data(
        self, hyperparameters: BaseModel, tables: Mapping[ChannelName, Table]
    ) -> PreparedData:
        """Controller-side preparation on whole channels, before they are sharded."""
        return PreparedData(tables)

    def reported_metrics(
        self, spec: TrainingJobSpec, hyperparameters: BaseModel
    ) -> frozenset[str] | None:
        """The metric names rank 0 reports every step, or None where that is not known."""
        return None

    def full_resource(self, hyperparameters: BaseModel) -> int | None:
        """How many steps a job runs when nothing stops it (rounds, epochs), if known."""
        return None

    def hyperparameter_names(self) -> frozenset[str] | None:
        """The names it takes; None where any name goes (a user's script)."""
        fields = self.hyperparameters_type.model_fields
        return frozenset(field.alias or name for name, field in fields.items())

    @property
    @abstractmethod
    def program(self) -> WorkerProgram:
        """The module-level function each worker runs."""


def _prefixed(message: str) -> str:
    """Name hyperparameter problems by their full key: `hyperparameters.eta`."""
    parts = []
    for part in message.split("; "):
        if part.startswith(("unknown key '", "missing key '")):
            head, _, rest = part.partition("'")
            parts.append(f"{head}'hyperparameters.{rest}")
        else:
            parts.append(f"hyperparameters.{part}")
    return "; ".join(parts)
