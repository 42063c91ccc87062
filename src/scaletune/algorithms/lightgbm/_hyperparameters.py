"""LightGBM's hyperparameters, named as LightGBM (and SageMaker's LightGBM) names them."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, model_validator


class Objective(StrEnum):
    BINARY = "binary"
    REGRESSION = "regression"
    REGRESSION_L1 = "regression_l1"
    HUBER = "huber"
    POISSON = "poisson"
    MULTICLASS = "multiclass"
    MULTICLASSOVA = "multiclassova"

    @property
    def is_binary(self) -> bool:
        return self is Objective.BINARY

    @property
    def is_multiclass(self) -> bool:
        return self in (Objective.MULTICLASS, Objective.MULTICLASSOVA)

    @property
    def default_metric(self) -> str:
        """What LightGBM evaluates when `metric` is not given."""
        return _DEFAULT_METRIC[self]


_DEFAULT_METRIC = {
    Objective.BINARY: "binary_logloss",
    Objective.REGRESSION: "l2",
    Objective.REGRESSION_L1: "l1",
    Objective.HUBER: "huber",
    Objective.POISSON: "poisson",
    Objective.MULTICLASS: "multi_logloss",
    Objective.MULTICLASSOVA: "multi_logloss",
}
# Metrics LightGBM computes the same on every rank from a replicated channel (names as
# LightGBM reports them, which are the names reports carry: `validation:auc`).
METRICS = (
    "auc",
    "average_precision",
    "binary_logloss",
    "binary_error",
    "l1",
    "l2",
    "rmse",
    "mape",
    "huber",
    "poisson",
    "multi_logloss",
    "multi_error",
)


class LightGBMHyperparameters(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    num_boost_round: int = Field(default=100, ge=1, le=100_000)
    learning_rate: float = Field(default=0.1, gt=0, le=1)
    num_leaves: int = Field(default=31, ge=2, le=131_072)
    max_depth: int = Field(default=-1, ge=-1, le=64, description="-1: no limit")
    # At least 1: LightGBM's data-parallel learner estimates a leaf's rows from its hessians
    # and, at 0, fails a split whose side it counts as empty (its serial learner does not).
    min_data_in_leaf: int = Field(default=20, ge=1)
    min_sum_hessian_in_leaf: float = Field(default=1e-3, ge=0)
    min_gain_to_split: float = Field(default=0.0, ge=0)
    lambda_l1: float = Field(default=0.0, ge=0)
    lambda_l2: float = Field(default=0.0, ge=0)
    feature_fraction: float = Field(default=1.0, gt=0, le=1)
    bagging_fraction: float = Field(default=1.0, gt=0, le=1)
    bagging_freq: int = Field(default=0, ge=0, description="0: no bagging")
    max_bin: int = Field(default=255, ge=2, le=65_535)
    scale_pos_weight: float = Field(default=1.0, gt=0)
    objective: Objective = Objective.BINARY
    num_class: int | None = Field(default=None, ge=2, le=1_000)
    metric: list[str] = Field(default_factory=list, description="unset: the objective's")

    @model_validator(mode="after")
    def _known_metrics(self) -> LightGBMHyperparameters:
        unknown = [name for name in self.metric if name not in METRICS]
        if unknown:
            raise ValueError(f"metric: {unknown} not among {list(METRICS)}")
        if self.num_class is not None and not self.objective.is_multiclass:
            raise ValueError(f"num_class goes with a multiclass objective, not {self.objective}")
        return self

    @property
    def metrics(self) -> list[str]:
        return self.metric or [self.objective.default_metric]

    @property
    def samples(self) -> bool:
        """Whether trees grow on sampled rows or columns: drawn from generators a model file
        leaves out, so a resumed run draws other samples than an uninterrupted one."""
        return self.feature_fraction < 1 or (self.bagging_freq > 0 and self.bagging_fraction < 1)

    def booster_params(self, *, seed: int, num_threads: int) -> dict[str, object]:
        """LightGBM's own parameters (`lightgbm.train`'s `params`), rounds apart."""
        params: dict[str, object] = self.model_dump(exclude={"num_boost_round", "metric"})
        params["objective"] = self.objective.value
        params["metric"] = self.metrics
        if self.num_class is None:
            del params["num_class"]
        params.update(
            seed=seed,
            num_threads=num_threads,
            deterministic=True,  # the same trees from the same data, run after run
            force_row_wise=True,  # and no timing test to choose the histogram layout
            verbosity=-1,
        )
        return params


# SageMaker's LightGBM defaults for a binary classifier, the reference's bank marketing job
# on LightGBM: AUC, as the XGBoost job reports it.
BANK_MARKETING_HYPERPARAMETERS: dict[str, object] = {
    "num_boost_round": 100,
    "learning_rate": 0.1,
    "num_leaves": 31,
    "objective": "binary",
    "metric": ["auc"],
}
