"""What an algorithm provides: its hyperparameters, checks, data preparation, program, and all
that the rest of scaletune needs to know of it (its steps' name, its checkpoints, its
rendezvous, its MLflow flavour, its notes for tuning), so that nothing outside `algorithms/`
asks which algorithm a job runs."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ValidationError

from scaletune.errors import InvalidInputError

if TYPE_CHECKING:
    from scaletune.data import Table
    from scaletune.data._table import FloatArray
    from scaletune.spec import ChannelName, TrainingJobSpec, TuningJobSpec
    from scaletune.worker import RendezvousNeeds, WorkerProgram


@dataclass(frozen=True)
class PreparedData:
    """Tables as the workers will read them, plus files to publish beside the model, and the
    hyperparameters completed from the data (a class count), where the algorithm needs that."""

    tables: Mapping[ChannelName, Table]
    artifact_files: Mapping[str, bytes] = field(default_factory=dict)
    hyperparameters: BaseModel | None = None


class Algorithm(ABC):
    """One algorithm. Built-ins are found by name (`algorithms.get_algorithm`); a package adds
    one through the `scaletune.algorithms` entry-point group, naming its subclass."""

    name: ClassVar[str]  # `algorithm = "..."` in a job file
    hyperparameters_type: ClassVar[type[BaseModel]]
    # The hyperparameter that sets how many steps a job runs (rounds, epochs), where there is one.
    steps_hyperparameter: ClassVar[str | None] = None
    step_name: ClassVar[str] = "step"  # what one step is called in reports and pictures
    # Whether a checkpoint holds each worker's own state (its place in its shard, say): then
    # another job goes on from it only on as many workers.
    checkpoints_per_worker: ClassVar[bool] = False
    # A user's script may read its data itself; a built-in trains on the train channel.
    needs_train_channel: ClassVar[bool] = True
    takes_script: ClassVar[bool] = False  # a [script] table: what to launch
    # Whether scaletune can score rows with its published model (batch prediction): a user's
    # script saves whatever it likes, which only the script can read.
    predicts: ClassVar[bool] = False
    # Whether its synchronous rounds can go on without their last `backup_workers` gradients.
    takes_backup_workers: ClassVar[bool] = False

    def rendezvous_needs(self, spec: TrainingJobSpec) -> RendezvousNeeds:
        """What this job's workers meet through, beyond rank 0's address."""
        from scaletune.worker import RendezvousNeeds

        return RendezvousNeeds()

    def parse_hyperparameters(self, raw: Mapping[str, Any]) -> BaseModel:
        from scaletune.spec import describe_validation_error

        try:
            return self.hyperparameters_type.model_validate(dict(raw))
        except ValidationError as exc:
            raise InvalidInputError(_prefixed(describe_validation_error(exc))) from None

    def check(self, spec: TrainingJobSpec) -> None:
        """Refuse a job this algorithm cannot run, naming the bad value."""
        self.check_inputs(spec)
        self.check_job(spec, self.parse_hyperparameters(spec.hyperparameters))

    def check_inputs(self, spec: TrainingJobSpec) -> None:
        """Its channels and its [script] table, as this algorithm takes them."""
        from scaletune.spec import ChannelName

        if self.needs_train_channel and ChannelName.TRAIN not in spec.channels:
            raise InvalidInputError("channels: missing channel 'train'")
        if spec.script is not None and not self.takes_script:
            raise InvalidInputError(f"[script] goes with algorithm 'script', not {self.name!r}")
        backup = spec.distribution.backup_workers
        if backup and not self.takes_backup_workers:
            raise InvalidInputError(
                f"distribution.backup_workers={backup}: algorithm {self.name!r} waits for every "
                "worker; the built-in dnn's rounds can go on without their last ones"
            )

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

    def examples_per_worker_step(self, hyperparameters: Mapping[str, object]) -> int | None:
        """The examples one worker's step trains on (its batch), where a step has a batch:
        the gradient noise scale is measured in such examples."""
        return None

    def save_mlflow_model(self, model_dir: Path, target: Path) -> bool:
        """Save the published model in `model_dir` as an MLflow model at `target`, in its own
        flavour; False where it has none (its files are logged as they are)."""
        return False

    def tuning_notices(self, spec: TuningJobSpec) -> list[str]:
        """Lines worth reading before a tuning job over this algorithm runs."""
        return []

    def model_width(self, model_dir: Path) -> int:
        """The feature columns its published model takes (where `predicts`)."""
        raise NotImplementedError(f"algorithm {self.name!r} does not predict")

    def predict(self, model_dir: Path, features: FloatArray, threads: int) -> FloatArray:
        """Its published model's predictions for these rows, one row each, in their order:
        a probability of the positive class, each class's, or a value (where `predicts`), on
        `threads` threads."""
        raise NotImplementedError(f"algorithm {self.name!r} does not predict")

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
