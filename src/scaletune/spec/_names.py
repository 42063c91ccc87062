"""Names shared by the specs and what reads their records, without pydantic (so reading a
stored job, as `tuning show` does, never pays for building the spec models)."""

from enum import StrEnum

CLUSTER_SIZE = "instance_count"  # a tuning range over this name varies the trials' workers

# The costs every trial records, usable as objectives or constraints beside reported metrics.
BILLABLE_SECONDS = "billable_seconds"
WALL_SECONDS = "wall_seconds"
COST_METRICS = (BILLABLE_SECONDS, WALL_SECONDS)


class ObjectiveType(StrEnum):
    MAXIMIZE = "Maximize"
    MINIMIZE = "Minimize"
