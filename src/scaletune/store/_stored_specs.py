"""What readers need of a stored spec, typed and without pydantic: a job's spec was validated
when it was written, so reading it back only names its fields. The defaults here are those of
specs stored before a field existed; `tests/store/test_stored_specs.py` holds them to the spec
models' own."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scaletune.spec._names import (
    CLUSTER_SIZE,
    BracketWeights,
    CapacityClass,
    ObjectiveType,
    RankBy,
)

CATEGORICAL = "Categorical"
LOGARITHMIC = "Logarithmic"
STOPPING = "stopping"  # Hyperband's type when a spec does not say
PBT = "PBT"


@dataclass(frozen=True)
class StoredObjective:
    metric: str
    type: ObjectiveType = ObjectiveType.MAXIMIZE

    @property
    def maximize(self) -> bool:
        return self.type is ObjectiveType.MAXIMIZE


@dataclass(frozen=True)
class StoredConstraint:
    metric: str
    min: float | None = None
    max: float | None = None


@dataclass(frozen=True)
class StoredRange:
    """A tuned name's range: its kind, a categorical range's values, the scale it is drawn on."""

    type: str
    values: tuple[Any, ...] = ()
    scaling: str = "Auto"

    @property
    def is_categorical(self) -> bool:
        return self.type == CATEGORICAL

    @property
    def is_logarithmic(self) -> bool:
        return self.scaling == LOGARITHMIC


@dataclass(frozen=True)
class StoredHyperband:
    max_resource: int
    min_resource: int = 1
    eta: int = 3
    brackets: int | None = 1
    type: str = STOPPING
    bracket_weights: BracketWeights = "hyperband"
    rank_by: RankBy | None = None  # unset: Hyperband's default for its objectives


@dataclass(frozen=True)
class StoredTuningSpec:
    strategy: str
    objectives: tuple[StoredObjective, ...]  # the primary first; one unless several are tuned
    constraints: tuple[StoredConstraint, ...] = ()
    ranges: Mapping[str, StoredRange] = field(default_factory=dict)
    hyperband: StoredHyperband | None = None
    max_jobs: int | None = None
    seed: int = 0
    target_objective: float | None = None
    training_prices: dict[str, float] | None = None  # its trials' cluster.prices

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> StoredTuningSpec:
        objectives = raw.get("objectives") or [
            {"metric": raw.get("objective_metric"), "type": raw.get("objective_type")}
        ]
        hyperband = raw.get("hyperband")
        cluster = (raw.get("training") or {}).get("cluster") or {}
        return cls(
            strategy=str(raw.get("strategy", "")),
            objectives=tuple(
                StoredObjective(str(o["metric"]), ObjectiveType(o.get("type") or "Maximize"))
                for o in objectives
            ),
            constraints=tuple(
                StoredConstraint(str(c["metric"]), c.get("min"), c.get("max"))
                for c in raw.get("constraints") or []
            ),
            ranges={
                name: StoredRange(
                    str(r.get("type", "")),
                    tuple(r.get("values") or ()),
                    str(r.get("scaling", _default(StoredRange, "scaling"))),
                )
                for name, r in (raw.get("ranges") or {}).items()
            },
            hyperband=None if not hyperband else StoredHyperband(**hyperband_fields(hyperband)),
            max_jobs=raw.get("max_jobs"),
            seed=int(raw.get("seed", _default(cls, "seed"))),
            target_objective=raw.get("target_objective"),
            training_prices=_prices(cluster.get("prices")),
        )

    @property
    def objective(self) -> StoredObjective:
        """The primary objective: what a trial's `objective` holds."""
        return self.objectives[0]

    @property
    def tuned(self) -> list[str]:
        """The tuned names, in the spec's order."""
        return list(self.ranges)

    @property
    def tuned_hyperparameters(self) -> list[str]:
        """The tuned names that are hyperparameters (a tuned cluster size is not)."""
        return [name for name in self.ranges if name != CLUSTER_SIZE]

    @property
    def tunes_cluster_size(self) -> bool:
        return CLUSTER_SIZE in self.ranges

    @property
    def is_pbt(self) -> bool:
        return self.strategy == PBT


def hyperband_fields(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A stored [hyperband] table's fields that `StoredHyperband` names (its searcher is the
    tuner's business). `brackets = None` is kept: it means every bracket."""
    names = StoredHyperband.__dataclass_fields__
    return {name: value for name, value in raw.items() if name in names}


@dataclass(frozen=True)
class StoredStart:
    """The checkpoint a job went on from (`checkpoint.start_from`)."""

    job: str
    step: int | None = None


@dataclass(frozen=True)
class StoredTrainingSpec:
    backend: str = "local"
    cpus_per_worker: float = 1.0
    notice_seconds: float = 30.0  # a worker's time from SIGTERM to its machine's end
    capacity: str = "on-demand"  # what its workers ran on: on-demand, spot, mixed
    prices: dict[str, float] | None = None  # a worker-second's price on each capacity class
    staging: str | None = None  # where the job staged its data, as written
    min_instance_count: int | None = None  # an elastic job's fewest workers
    start_from: StoredStart | None = None
    enabled: bool = True  # [checkpoint]: whether it kept checkpoints
    checkpoint_path: str | None = None  # ... and where, if not beside its staging or folder
    output_path: str | None = None

    @classmethod
    def of(cls, raw: Mapping[str, Any]) -> StoredTrainingSpec:
        cluster = raw.get("cluster") or {}
        checkpoint = raw.get("checkpoint") or {}
        staging = cluster.get("staging")
        start = checkpoint.get("start_from")
        return cls(
            backend=str(cluster.get("backend") or _default(cls, "backend")),
            cpus_per_worker=float(cluster.get("cpus_per_worker", _default(cls, "cpus_per_worker"))),
            notice_seconds=float(cluster.get("notice_seconds", _default(cls, "notice_seconds"))),
            capacity=str(cluster.get("capacity") or _default(cls, "capacity")),
            prices=_prices(cluster.get("prices")),
            staging=staging if isinstance(staging, str) else None,
            min_instance_count=raw.get("min_instance_count"),
            start_from=None if not start else StoredStart(str(start["job"]), start.get("step")),
            enabled=bool(checkpoint.get("enabled", _default(cls, "enabled"))),
            checkpoint_path=checkpoint.get("path"),
            output_path=raw.get("output_path"),
        )


def _prices(raw: Mapping[str, Any] | None) -> dict[str, float] | None:
    """By capacity class, as billing names them ("on-demand", "spot")."""
    if not raw:
        return None
    return {
        CapacityClass.ON_DEMAND.value: float(raw["on_demand"]),
        CapacityClass.SPOT.value: float(raw["spot"]),
    }


def _default(view: type, name: str) -> Any:
    """A view's own default for a field a stored spec leaves out (the test holds each to the
    model's)."""
    return {field.name: field.default for field in dataclasses.fields(view)}[name]
