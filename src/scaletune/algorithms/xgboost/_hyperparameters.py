"""XGBoost's hyperparameters, named as the reference names them."""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator


class TreeMethod(StrEnum):
    AUTO = "auto"
    EXACT = "exact"
    APPROX = "approx"
    HIST = "hist"


class Objective(StrEnum):
    BINARY_LOGISTIC = "binary:logistic"
    BINARY_LOGITRAW = "binary:logitraw"
    BINARY_HINGE = "binary:hinge"
    REG_SQUAREDERROR = "reg:squarederror"
    REG_ABSOLUTEERROR = "reg:absoluteerror"
    REG_PSEUDOHUBERERROR = "reg:pseudohubererror"
    REG_LOGISTIC = "reg:logistic"
    COUNT_POISSON = "count:poisson"
    MULTI_SOFTMAX = "multi:softmax"
    MULTI_SOFTPROB = "multi:softprob"

    @property
    def is_binary(self) -> bool:
        return self.value.startswith("binary:")

    @property
    def is_multiclass(self) -> bool:
        return self.value.startswith("multi:")

    @property
    def default_metric(self) -> str:
        """What XGBoost evaluates when eval_metric is not given."""
        return _DEFAULT_METRIC[self]


_DEFAULT_METRIC = {
    Objective.BINARY_LOGISTIC: "logloss",
    Objective.BINARY_LOGITRAW: "logloss",
    Objective.BINARY_HINGE: "error",
    Objective.REG_SQUAREDERROR: "rmse",
    Objective.REG_ABSOLUTEERROR: "mae",
    Objective.REG_PSEUDOHUBERERROR: "mphe",
    Objective.REG_LOGISTIC: "rmse",
    Objective.COUNT_POISSON: "poisson-nloglik",
    Objective.MULTI_SOFTMAX: "mlogloss",
    Objective.MULTI_SOFTPROB: "mlogloss",
}

_METRIC = re.compile(
    r"^(auc|aucpr|logloss|error(@[0-9.]+)?|rmse|rmsle|mae|mape|mphe|mlogloss|merror|"
    r"poisson-nloglik|pre@\d+|ndcg(@\d+)?|map(@\d+)?)$"
)


# The reference's static settings for bank marketing (REFERENCE.md section 2), with the
# distributable tree method in place of its `exact`.
REFERENCE_HYPERPARAMETERS: dict[str, object] = {
    "num_round": 150,
    "eta": 0.3,
    "colsample_bylevel": 0.5,
    "colsample_bytree": 0.8,
    "objective": "binary:logistic",
    "eval_metric": "auc",
    "tree_method": "hist",
}


class XGBoostHyperparameters(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    num_round: int = Field(default=100, ge=1, le=100_000)
    eta: float = Field(default=0.3, ge=0, le=1)
    gamma: float = Field(default=0.0, ge=0)
    max_depth: int = Field(default=6, ge=0, le=64)
    min_child_weight: float = Field(default=1.0, ge=0)
    max_delta_step: float = Field(default=0.0, ge=0)
    subsample: float = Field(default=1.0, gt=0, le=1)
    colsample_bytree: float = Field(default=1.0, gt=0, le=1)
    colsample_bylevel: float = Field(default=1.0, gt=0, le=1)
    colsample_bynode: float = Field(default=1.0, gt=0, le=1)
    reg_lambda: float = Field(default=1.0, ge=0, alias="lambda")
    alpha: float = Field(default=0.0, ge=0)
    scale_pos_weight: float = Field(default=1.0, gt=0)
    tree_method: TreeMethod = TreeMethod.HIST
    max_bin: int = Field(default=256, ge=2, le=65_536)
    objective: Objective = Objective.BINARY_LOGISTIC
    eval_metric: list[str] | None = None
    num_class: int | None = Field(default=None, ge=2)
    nthread: int | None = Field(default=None, ge=1, description="threads per worker")
    quantize_features: bool = Field(
        default=False,
        description="bin every feature to at most max_bin values before training, so that "
        "1 and N workers build the same trees",
    )

    @field_validator("eval_metric", mode="before")
    @classmethod
    def _metric_list(cls, value: object) -> object:
        return [value] if isinstance(value, str) else value

    @field_validator("eval_metric")
    @classmethod
    def _known_metrics(cls, value: list[str] | None) -> list[str] | None:
        for metric in value or ():
            if not _METRIC.match(metric):
                raise ValueError(f"unknown evaluation metric {metric!r}")
        return value

    @property
    def samples(self) -> bool:
        """Whether trees are grown on random rows or columns: then XGBoost's samplers hold
        random state that its model files do not keep."""
        fractions = (self.subsample, self.colsample_bytree, self.colsample_bylevel)
        return min(*fractions, self.colsample_bynode) < 1

    def booster_params(self, *, seed: int, nthread: int) -> dict[str, object]:
        """The parameter dict xgboost.train takes."""
        params: dict[str, object] = {
            "eta": self.eta,
            "gamma": self.gamma,
            "max_depth": self.max_depth,
            "min_child_weight": self.min_child_weight,
            "max_delta_step": self.max_delta_step,
            "subsample": self.subsample,
            "colsample_bytree": self.colsample_bytree,
            "colsample_bylevel": self.colsample_bylevel,
            "colsample_bynode": self.colsample_bynode,
            "lambda": self.reg_lambda,
            "alpha": self.alpha,
            "scale_pos_weight": self.scale_pos_weight,
            "tree_method": self.tree_method.value,
            "max_bin": self.max_bin,
            "objective": self.objective.value,
            "seed": seed,
            # Rows drawn from (seed, round) alone, not from the draws of earlier rounds: what
            # a run resumed at some round needs to draw as an uninterrupted one does.
            "seed_per_iteration": True,
            "nthread": self.nthread or nthread,
            "verbosity": 1,
        }
        if self.eval_metric:
            params["eval_metric"] = list(self.eval_metric)
        if self.num_class is not None:
            params["num_class"] = self.num_class
        return params
