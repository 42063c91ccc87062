"""Names, and the defaults read with them, shared by the specs and what reads their records,
without pydantic (so reading a stored job, as `tuning show` does, never pays for building
the spec models)."""

from collections.abc import Sequence
from enum import StrEnum
from typing import Literal

CLUSTER_SIZE = "instance_count"  # a tuning range over this name varies the trials' workers

# The costs every trial records, usable as objectives or constraints beside reported metrics.
BILLABLE_SECONDS = "billable_seconds"
WALL_SECONDS = "wall_seconds"
COST_METRICS = (BILLABLE_SECONDS, WALL_SECONDS)


class CapacityClass(StrEnum):
    """What a worker runs on, and is billed as: capacity held until the job lets it go, or
    spot capacity, cheaper and taken back at a notice."""

    ON_DEMAND = "on-demand"
    SPOT = "spot"


class ObjectiveType(StrEnum):
    MAXIMIZE = "Maximize"
    MINIMIZE = "Minimize"


RankBy = Literal["value", "forecast"]
BracketWeights = Literal["hyperband", "adaptive"]  # Hyperband's, or adapted to its rungs
# A forecast fits pow3 (three parameters) to a trial's reports: through three it is no forecast.
FORECAST_MIN_REPORTS = 4


def bracket_rungs(min_resource: int, max_resource: int, eta: int, bracket: int = 0) -> list[int]:
    """Hyperband bracket `bracket`'s rungs: min_resource * eta**(bracket + k) below
    max_resource, for k = 0, 1, ..."""
    rungs, rung = [], min_resource * eta**bracket
    while rung < max_resource:
        rungs.append(rung)
        rung *= eta
    return rungs


def forecasts_later(later: Sequence[int]) -> bool:
    """Whether any of these later rungs (a step each, a report a step) will have the reports
    a forecast needs: where none will, a rung that cannot forecast ranks values instead."""
    return any(rung >= FORECAST_MIN_REPORTS for rung in later)


def default_rank_by(multi_objective: bool) -> RankBy:
    """What Hyperband's rungs rank when the spec does not say. The forecast with one
    objective: against ranking values it stops poor trials a little later and ends much
    better on LCBench, and on the reference's bank job it keeps the slow learners that win
    there (benchmarks/README.md, "Where scaletune stands against the other tools"). Values
    with several objectives, where it was not measured."""
    return "value" if multi_objective else "forecast"
