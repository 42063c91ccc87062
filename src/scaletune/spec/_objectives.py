"""Several objectives and constraints of a tuning job: quality, cost and time together.

An objective or a constraint names a metric the job reports, or one of the trial's own costs
(`COST_METRICS` in `_names`: its billable worker-seconds, its wall time), which every job has. A
constraint is written as a table (`{metric = "validation:auc", min = 0.78}`) or, the same, as
one line (`"validation:auc >= 0.78"`)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, model_validator

from scaletune.spec._frozen import Frozen
from scaletune.spec._names import ObjectiveType

_CONSTRAINT_LINE = re.compile(r"^\s*(?P<metric>\S+)\s*(?P<op>>=|<=)\s*(?P<bound>\S+)\s*$")


class ObjectiveSpec(Frozen):
    metric: str = Field(min_length=1)
    type: ObjectiveType

    @property
    def maximize(self) -> bool:
        return self.type is ObjectiveType.MAXIMIZE


class ConstraintSpec(Frozen):
    """A trial is feasible when its final value of `metric` is within [min, max]."""

    metric: str = Field(min_length=1)
    min: float | None = None
    max: float | None = None

    @model_validator(mode="before")
    @classmethod
    def _from_line(cls, raw: Any) -> Any:
        if not isinstance(raw, str):
            return raw
        match = _CONSTRAINT_LINE.match(raw)
        if match is None:
            raise ValueError(
                f"{raw!r} is not a constraint: write 'METRIC >= VALUE' or 'METRIC <= VALUE'"
            )
        try:
            bound = float(match["bound"])
        except ValueError:
            raise ValueError(f"{raw!r}: {match['bound']!r} is not a number") from None
        side = "min" if match["op"] == ">=" else "max"
        return {"metric": match["metric"], side: bound}

    @model_validator(mode="after")
    def _bounded(self) -> ConstraintSpec:
        if self.min is None and self.max is None:
            raise ValueError(f"the constraint on {self.metric!r} needs min or max")
        if self.min is not None and self.max is not None and self.min > self.max:
            raise ValueError(
                f"the constraint on {self.metric!r}: min={self.min:g} is above max={self.max:g}"
            )
        return self
