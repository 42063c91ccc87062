"""What the convergence experiment runs for each algorithm: the reference's settings."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaletune.algorithms.xgboost import REFERENCE_HYPERPARAMETERS
from scaletune.spec import BuiltinDataset


@dataclass(frozen=True)
class ReferenceFigures:
    """REFERENCE.md section 2, for the side-by-side tables."""

    workers: int
    training_minutes: tuple[float, float]  # 1 instance, N instances
    validation: tuple[float, float]
    tuning_quality: tuple[float, float] | None = None  # naive, Hyperband
    tuning_billable_minutes: tuple[float, float] | None = None  # no early stopping, Hyperband
    tuning_wall_minutes: tuple[float, float] | None = None


@dataclass(frozen=True)
class TransferPlan:
    """How one worker's settings go to N workers without a tuning job there: what is added to
    their hyperparameters and the distribution that carries them."""

    label: str
    hyperparameters: dict[str, Any]
    distribution: dict[str, Any]


@dataclass(frozen=True)
class ExperimentPlan:
    algorithm: str
    dataset: BuiltinDataset
    dataset_file: Path | None
    hyperparameters: dict[str, Any]  # the naive (1-worker) settings every static run uses
    distribution: dict[str, Any]
    objective_metric: str
    test_metric: str
    ranges: dict[str, dict[str, Any]]
    min_resource: int
    max_resource: int
    max_jobs: int
    max_parallel_jobs: int
    reference: ReferenceFigures
    eta: int = 3
    searcher: str = "Random"  # Hyperband's proposals, and the search run without early stopping
    notes: list[str] = field(default_factory=list)
    transfer: TransferPlan | None = None  # tuned on one worker, run on N without re-tuning

    @property
    def channels(self) -> dict[str, dict[str, str]]:
        channel = {"dataset": self.dataset.value}
        if self.dataset_file is not None:
            channel["dataset_file"] = str(self.dataset_file)
        return {"train": channel, "validation": channel, "test": channel}

    @property
    def metric_label(self) -> str:
        return self.objective_metric.removeprefix("validation:")


XGBOOST_REFERENCE = ReferenceFigures(
    workers=3,
    training_minutes=(3, 1),
    validation=(0.78, 0.63),
    tuning_quality=(0.63, 0.78),
    tuning_billable_minutes=(90, 30),
    tuning_wall_minutes=(24, 12),
)
DNN_REFERENCE = ReferenceFigures(workers=4, training_minutes=(8, 3), validation=(0.97, 0.11))

_XGBOOST_RANGES: dict[str, dict[str, Any]] = {
    "num_round": {"type": "Integer", "min_value": 100, "max_value": 200},
    "eta": {"type": "Continuous", "min_value": 0, "max_value": 1},
    "min_child_weight": {"type": "Continuous", "min_value": 1, "max_value": 10},
    "alpha": {"type": "Continuous", "min_value": 0, "max_value": 2},
    "max_depth": {"type": "Integer", "min_value": 1, "max_value": 10},
    "colsample_bylevel": {"type": "Continuous", "min_value": 0.01, "max_value": 1},
    "colsample_bytree": {"type": "Continuous", "min_value": 0.01, "max_value": 1},
}

REFERENCE_ASYNC_SERVER: dict[str, Any] = {
    "strategy": "parameter_server",
    "mode": "async",
    "staleness_compensation": "none",
    "implicit_momentum": "ignore",
}

# AdaScale's learning rate follows the gradient noise measured on N workers: one worker's
# settings need no tuning per size (benchmarks/results/convergence_scale_out.md).
ADASCALE_TRANSFER = TransferPlan(
    label="AdaScale",
    hyperparameters={"lr_scaling": "adascale"},
    distribution={"strategy": "allreduce"},
)

# One worker's settings for MNIST-like images (benchmarks/dnn_modes.md); on an asynchronous
# parameter server, stale gradients compound with momentum and the weights oscillate.
DNN_NAIVE: dict[str, Any] = {
    "model": "mlp",
    "hidden_units": 128,
    "epochs": 5,
    "batch_size": 64,
    "learning_rate": 0.05,
    "optimizer": "sgd",
    "momentum": 0.9,
}
_DNN_RANGES: dict[str, dict[str, Any]] = {
    "learning_rate": {
        "type": "Continuous",
        "min_value": 0.001,
        "max_value": 0.3,
        "scaling": "Logarithmic",
    },
    "momentum": {"type": "Continuous", "min_value": 0.0, "max_value": 0.95},
    "batch_size": {"type": "Integer", "min_value": 32, "max_value": 256, "scaling": "Logarithmic"},
}


def plan_for(
    algorithm: str,
    data: Path | None,
    *,
    max_jobs: int | None = None,
    max_parallel_jobs: int | None = None,
) -> ExperimentPlan:
    """The reference's experiment on real data when `data` is given (bank marketing's CSV,
    MNIST's folder), else a small one on a dataset scikit-learn ships (offline)."""
    plan = _PLANS[algorithm](data)
    return ExperimentPlan(
        **{
            **plan.__dict__,
            "max_jobs": max_jobs or plan.max_jobs,
            "max_parallel_jobs": max_parallel_jobs or plan.max_parallel_jobs,
        }
    )


def _xgboost_plan(data: Path | None) -> ExperimentPlan:
    full = data is not None
    return ExperimentPlan(
        algorithm="xgboost",
        dataset=BuiltinDataset.BANK_MARKETING if full else BuiltinDataset.BREAST_CANCER,
        dataset_file=data,
        hyperparameters=dict(REFERENCE_HYPERPARAMETERS)
        if full
        else {**REFERENCE_HYPERPARAMETERS, "num_round": 50, "max_bin": 16},
        distribution={"strategy": "allreduce"},
        objective_metric="validation:auc",
        test_metric="test:auc",
        ranges=_XGBOOST_RANGES
        if full
        else {
            **_XGBOOST_RANGES,
            "num_round": {"type": "Integer", "min_value": 20, "max_value": 60},
        },
        min_resource=1,
        max_resource=200 if full else 60,
        max_jobs=30 if full else 12,
        max_parallel_jobs=4 if full else 2,
        reference=XGBOOST_REFERENCE,
    )


def _dnn_plan(data: Path | None) -> ExperimentPlan:
    full = data is not None
    return ExperimentPlan(
        algorithm="dnn",
        dataset=BuiltinDataset.MNIST if full else BuiltinDataset.DIGITS,
        dataset_file=data,
        hyperparameters=DNN_NAIVE if full else {**DNN_NAIVE, "batch_size": 32, "hidden_units": 64},
        # The reference's server: stale gradients applied as they come, the momentum asked
        # for kept (scaletune's default takes off what asynchrony adds).
        distribution=REFERENCE_ASYNC_SERVER,
        objective_metric="validation:accuracy",
        test_metric="test:accuracy",
        ranges=_DNN_RANGES,
        min_resource=1,
        max_resource=int(DNN_NAIVE["epochs"]),
        max_jobs=20 if full else 8,
        max_parallel_jobs=2,
        reference=DNN_REFERENCE,
        transfer=ADASCALE_TRANSFER,
    )


# The reference's two experiments, by the algorithm each runs.
_PLANS = {"xgboost": _xgboost_plan, "dnn": _dnn_plan}
EXPERIMENT_ALGORITHMS = tuple(_PLANS)
