"""The typed views of stored specs: what a validated spec stored says, read back without
pydantic, and the defaults of a spec stored before a field existed held to the models'."""

from __future__ import annotations

import dataclasses
from enum import Enum
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel

from scaletune.spec import (
    CheckpointSpec,
    ClusterSpec,
    ConstraintSpec,
    ContinuousRange,
    HyperbandSpec,
    ObjectiveSpec,
    ObjectiveType,
    StartFrom,
    TrainingJobSpec,
    TuningJobSpec,
    training_spec_from_dict,
    tuning_spec_from_dict,
)
from scaletune.store import (
    StoredConstraint,
    StoredHyperband,
    StoredObjective,
    StoredRange,
    StoredStart,
    StoredTrainingSpec,
    StoredTuningSpec,
)
from tests.spec.test_tuning_spec import _raw


def _stored(raw: dict[str, Any]) -> dict[str, Any]:
    """As the store keeps it: the validated spec, dumped to JSON's types."""
    return tuning_spec_from_dict(raw).model_dump(mode="json")


def test_a_stored_tuning_spec_reads_back_as_validated() -> None:
    raw = _raw(
        hyperband={"min_resource": 3, "max_resource": 81, "eta": 3, "brackets": None},
        objectives=[
            {"metric": "validation:auc", "type": "Maximize"},
            {"metric": "billable_seconds", "type": "Minimize"},
        ],
        constraints=[{"metric": "wall_seconds", "max": 600}],
        ranges={
            "eta": {"type": "Continuous", "min_value": 0.001, "max_value": 1.0},
            "max_depth": {"type": "Categorical", "values": [3, 6, 9]},
            "lambda": {
                "type": "Continuous",
                "min_value": 1e-3,
                "max_value": 10.0,
                "scaling": "Logarithmic",
            },
            "instance_count": {"type": "Integer", "min_value": 1, "max_value": 3},
        },
        target_objective=0.9,
        seed=7,
    )
    del raw["objective_metric"]
    view = StoredTuningSpec.of(_stored(raw))
    assert view.strategy == "Hyperband"
    assert view.objectives == (
        StoredObjective("validation:auc", ObjectiveType.MAXIMIZE),
        StoredObjective("billable_seconds", ObjectiveType.MINIMIZE),
    )
    assert view.objective.maximize and not view.objectives[1].maximize
    assert view.constraints == (StoredConstraint("wall_seconds", None, 600),)
    assert view.tuned == ["eta", "max_depth", "lambda", "instance_count"]
    assert view.tuned_hyperparameters == ["eta", "max_depth", "lambda"]
    assert view.tunes_cluster_size
    assert view.ranges["max_depth"] == StoredRange("Categorical", (3, 6, 9), "Auto")
    assert view.ranges["max_depth"].is_categorical
    assert view.ranges["lambda"].is_logarithmic and not view.ranges["eta"].is_logarithmic
    assert view.hyperband == StoredHyperband(
        max_resource=81, min_resource=3, eta=3, brackets=None, type="stopping"
    )
    assert (view.max_jobs, view.seed, view.target_objective) == (6, 7, 0.9)
    assert not view.is_pbt


def test_one_objective_is_read_from_objective_metric_and_type() -> None:
    raw = _raw(objective_metric="train:auc", objective_type="Minimize")
    view = StoredTuningSpec.of(_stored(raw))
    assert view.objectives == (StoredObjective("train:auc", ObjectiveType.MINIMIZE),)
    assert view.constraints == () and view.target_objective is None


def test_a_spec_stored_before_its_fields_existed_reads_with_the_models_defaults() -> None:
    view = StoredTuningSpec.of(
        {
            "objective_metric": "validation:auc",
            "strategy": "Hyperband",
            "hyperband": {"max_resource": 27},
            "ranges": {"eta": {"type": "Continuous", "min_value": 0.01, "max_value": 1}},
        }
    )
    validated = TuningJobSpec.model_validate(_raw(hyperband={"max_resource": 27}))
    assert view.objective.type is validated.objective_type
    assert view.seed == validated.seed
    assert validated.hyperband is not None and view.hyperband is not None
    for name in ("min_resource", "eta", "brackets", "type", "bracket_weights", "rank_by"):
        assert getattr(view.hyperband, name) == getattr(validated.hyperband, name), name
    assert view.ranges["eta"].scaling == validated.ranges["eta"].scaling  # type: ignore[union-attr]


# Where each view's fields come from: the models, in order, whose field of the same name (or
# of the name given) it reads. A field the view has that no model has is its own.
SOURCES: dict[type, tuple[type[BaseModel], ...]] = {
    StoredHyperband: (HyperbandSpec,),
    StoredTuningSpec: (TuningJobSpec,),
    StoredTrainingSpec: (ClusterSpec, CheckpointSpec, TrainingJobSpec),
    StoredRange: (ContinuousRange,),
    StoredObjective: (ObjectiveSpec,),
    StoredConstraint: (ConstraintSpec,),
    StoredStart: (StartFrom,),
}
RENAMED: dict[tuple[type, str], tuple[type[BaseModel], str]] = {
    (StoredTrainingSpec, "checkpoint_path"): (CheckpointSpec, "path"),
    (StoredTuningSpec, "training_prices"): (ClusterSpec, "prices"),
    (StoredObjective, "type"): (TuningJobSpec, "objective_type"),  # the primary's default
}
OWN = {  # the view's shape of what the model keeps otherwise: no default to compare
    (StoredTuningSpec, "objectives"),
    (StoredTuningSpec, "constraints"),
    (StoredTuningSpec, "ranges"),
    (StoredRange, "values"),
}


@pytest.mark.parametrize("view", list(SOURCES), ids=lambda view: view.__name__)
def test_every_default_of_a_view_is_its_models(view: type) -> None:
    """Every field with a default, not a hand-picked few: a view's default is the model's."""
    for field in dataclasses.fields(view):
        if field.default is dataclasses.MISSING or (view, field.name) in OWN:
            continue
        model, name = RENAMED.get((view, field.name)) or next(
            ((model, field.name) for model in SOURCES[view] if field.name in model.model_fields),
            (None, field.name),
        )
        assert model, f"{view.__name__}.{field.name}: no model has it; say where it comes from"
        if model.model_fields[name].is_required():
            continue  # every stored spec has it: the view's default is never read
        expected = model.model_fields[name].default
        if isinstance(expected, Path | Enum):  # kept as text in a stored spec
            expected = str(expected.value if isinstance(expected, Enum) else expected)
        assert field.default == expected, f"{view.__name__}.{field.name}"


def test_a_stored_training_spec_reads_back_as_validated() -> None:
    spec = training_spec_from_dict(
        {
            "algorithm": "xgboost",
            "instance_count": {"min": 2, "max": 4},
            "hyperparameters": {"num_round": 10},
            "channels": {"train": {"dataset": "breast-cancer"}},
            "cluster": {"cpus_per_worker": 2.0, "staging": "s3://bucket/staged"},
            "checkpoint": {"start_from": {"job": "job-1", "step": 5}},
        }
    )
    view = StoredTrainingSpec.of(spec.model_dump(mode="json"))
    assert view == StoredTrainingSpec(
        backend="local",
        cpus_per_worker=2.0,
        staging="s3://bucket/staged",
        min_instance_count=2,
        start_from=StoredStart("job-1", 5),
    )
    assert StoredTrainingSpec.of({}) == StoredTrainingSpec()
