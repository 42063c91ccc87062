"""Hyperparameter ranges, validated, each with the search space a sampler draws from."""

from __future__ import annotations

import math
from enum import StrEnum
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

if TYPE_CHECKING:  # Optuna is imported by the samplers that use it, not by every job file
    from optuna.distributions import BaseDistribution

CategoryValue = str | int | float | bool

# A range spanning this many orders of magnitude (or more) is searched on a log scale by Auto.
AUTO_LOG_DECADES = 3.0


class Scaling(StrEnum):
    AUTO = "Auto"
    LINEAR = "Linear"
    LOGARITHMIC = "Logarithmic"
    REVERSE_LOGARITHMIC = "ReverseLogarithmic"  # dense near the top: for values close to 1


class _Range(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class ContinuousRange(_Range):
    type: Literal["Continuous"] = "Continuous"
    min_value: float
    max_value: float
    scaling: Scaling = Scaling.AUTO

    @model_validator(mode="after")
    def _valid(self) -> ContinuousRange:
        _check_bounds(self.min_value, self.max_value, self.scaling)
        if self.scaling is Scaling.REVERSE_LOGARITHMIC and not (
            self.min_value >= 0 and self.max_value < 1
        ):
            raise ValueError(
                f"ReverseLogarithmic needs 0 <= min_value and max_value < 1 "
                f"(got {self.min_value}..{self.max_value})"
            )
        return self

    @property
    def effective_scaling(self) -> Scaling:
        return _auto(self.min_value, self.max_value, self.scaling)

    def distribution(self) -> BaseDistribution:
        from optuna.distributions import FloatDistribution

        scaling = self.effective_scaling
        if scaling is Scaling.REVERSE_LOGARITHMIC:  # drawn as 1 - x on a log scale
            return FloatDistribution(1 - self.max_value, 1 - self.min_value, log=True)
        return FloatDistribution(self.min_value, self.max_value, log=scaling is Scaling.LOGARITHMIC)

    def from_sample(self, sample: float) -> float:
        if self.effective_scaling is Scaling.REVERSE_LOGARITHMIC:
            return 1 - sample
        return sample

    def to_sample(self, value: float) -> float:
        return self.from_sample(value)  # the map is its own inverse

    def middle(self) -> float:
        """Halfway on the range's own scale (for Logarithmic, the geometric mean)."""
        scaling = self.effective_scaling
        if scaling is Scaling.LOGARITHMIC:
            return math.sqrt(self.min_value * self.max_value)
        if scaling is Scaling.REVERSE_LOGARITHMIC:
            return 1 - math.sqrt((1 - self.min_value) * (1 - self.max_value))
        return (self.min_value + self.max_value) / 2

    def check(self, value: object) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError(f"{value!r} is not a number")
        if not self.min_value <= value <= self.max_value:
            raise ValueError(f"{value!r} is outside {self.min_value}..{self.max_value}")
        return float(value)


class IntegerRange(_Range):
    type: Literal["Integer"] = "Integer"
    min_value: int
    max_value: int
    scaling: Scaling = Scaling.AUTO

    @model_validator(mode="after")
    def _valid(self) -> IntegerRange:
        _check_bounds(self.min_value, self.max_value, self.scaling)
        if self.scaling is Scaling.REVERSE_LOGARITHMIC:
            raise ValueError("ReverseLogarithmic is for continuous ranges within [0, 1)")
        return self

    def distribution(self) -> BaseDistribution:
        from optuna.distributions import IntDistribution

        scaling = _auto(self.min_value, self.max_value, self.scaling)
        return IntDistribution(self.min_value, self.max_value, log=scaling is Scaling.LOGARITHMIC)

    def from_sample(self, sample: float) -> int:
        return int(sample)

    def to_sample(self, value: int) -> int:
        return value

    def grid(self) -> list[int]:
        return list(range(self.min_value, self.max_value + 1))

    def middle(self) -> int:
        """Halfway on the range's own scale, to the nearest whole number."""
        low, high = self.min_value, self.max_value
        if _auto(low, high, self.scaling) is Scaling.LOGARITHMIC:
            return min(max(round(math.sqrt(low * high)), low), high)
        return round((low + high) / 2)

    def check(self, value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{value!r} is not a whole number")
        if not self.min_value <= value <= self.max_value:
            raise ValueError(f"{value!r} is outside {self.min_value}..{self.max_value}")
        return value


class CategoricalRange(_Range):
    type: Literal["Categorical"] = "Categorical"
    values: list[CategoryValue] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> CategoricalRange:
        if len({repr(value) for value in self.values}) != len(self.values):
            raise ValueError(f"values repeat: {self.values}")
        return self

    def distribution(self) -> BaseDistribution:
        from optuna.distributions import CategoricalDistribution

        return CategoricalDistribution(self.values)

    def from_sample(self, sample: CategoryValue) -> CategoryValue:
        return sample

    def to_sample(self, value: CategoryValue) -> CategoryValue:
        return value

    def grid(self) -> list[CategoryValue]:
        return list(self.values)

    def middle(self) -> CategoryValue:
        """Categories have no middle: the first value (Syne Tune's default too)."""
        return self.values[0]

    def check(self, value: object) -> CategoryValue:
        """The category `value` names (a number matches an equal one; True is not 1)."""
        for allowed in self.values:
            if isinstance(allowed, bool) is isinstance(value, bool) and allowed == value:
                return allowed
        raise ValueError(f"{value!r} is not one of {self.values}")


Range = ContinuousRange | IntegerRange | CategoricalRange
ParameterRange = Annotated[
    ContinuousRange | IntegerRange | CategoricalRange, Field(discriminator="type")
]


def _check_bounds(low: float, high: float, scaling: Scaling) -> None:
    if not low < high:
        raise ValueError(f"min_value must be below max_value (got {low}..{high})")
    if scaling is Scaling.LOGARITHMIC and low <= 0:
        raise ValueError(f"Logarithmic scaling needs min_value > 0 (got {low})")


def _auto(low: float, high: float, scaling: Scaling) -> Scaling:
    """Auto: logarithmic for positive ranges spanning 3 or more decades, else linear."""
    if scaling is not Scaling.AUTO:
        return scaling
    if low > 0 and math.log10(high / low) >= AUTO_LOG_DECADES:
        return Scaling.LOGARITHMIC
    return Scaling.LINEAR
