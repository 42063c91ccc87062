"""Names, and the defaults read with them, shared by the specs and what reads their records,
without pydantic (so reading a stored job, as `tuning show` does, never pays for building
the spec models)."""

from enum import StrEnum
from typing import Literal

CLUSTER_SIZE = "instance_count"  # a tuning range over this name varies the trials' workers

# The costs every trial records, usable as objectives or constraints beside reported metrics.
BILLABLE_SECONDS = "billable_seconds"
WALL_SECONDS = "wall_seconds"
COST_METRICS = (BILLABLE_SECONDS, WALL_SECONDS)


class ObjectiveType(StrEnum):
    MAXIMIZE = "Maximize"
    MINIMIZE = "Minimize"


RankBy = Literal["value", "forecast"]
BracketWeights = Literal["hyperband", "adaptive"]  # Hyperband's, or adapted to its rungs


def default_rank_by(multi_objective: bool) -> RankBy:
    """What Hyperband's rungs rank when the spec does not say. The forecast with one
    objective: on all 34 LCBench tasks x 60 seeds, against ranking values, regret +0.14
    [-0.04, +0.33] / -0.34 [-0.52, -0.17] / -0.90 [-1.07, -0.74] at 25 / 50 / 100 % of the
    budget (a little later to stop poor trials, much better at the end), and on the
    reference's bank job it keeps the slow learners that win there, level with the full search
    at 0.20x its cost where values trail it by 0.0054
    (benchmarks/results/tuning_lcbench_all_pooled60.md, tuning_reference_default.md). Values
    with several objectives, where it was not measured."""
    return "value" if multi_objective else "forecast"
