"""Billable seconds, as a cloud bills the machines it runs: each period's processes times its
length, on each capacity class apart."""

from __future__ import annotations

from collections.abc import Mapping

from scaletune.spec import CapacityClass, TrainingJobSpec
from scaletune.store import TrainingJobRecord


class Billing:
    """Billable seconds: each period's processes times its length, as a cloud bills the
    machines it runs (an elastic job's size changes from one period to the next), kept on
    each capacity class apart (on-demand and spot capacity have their prices)."""

    def __init__(self, earlier: Mapping[str, float], started: float) -> None:
        self.by_class, self._since = dict(earlier), started

    @property
    def total(self) -> float:
        return sum(self.by_class.values())

    def add(self, processes: Mapping[CapacityClass, int], now: float) -> float:
        """The period up to `now` at these processes on each class; the total so far."""
        length = max(now - self._since, 0.0)
        for capacity, count in processes.items():
            self.by_class[capacity.value] = self.by_class.get(capacity.value, 0.0) + count * length
        self._since = now
        return self.total


def billed_before(spec: TrainingJobSpec, earlier: TrainingJobRecord) -> dict[str, float]:
    """A resumed job's billing so far, by class (one from before classes were kept: all of
    it on the class its job asked for, or on-demand for a mixed one)."""
    if earlier.billable_by_class is not None:
        return dict(earlier.billable_by_class)
    billed = earlier.billable_seconds
    if billed is None:
        billed = spec.task_count * (earlier.wall_seconds or 0.0)
    if not billed:
        return {}
    return {spec.capacity_of_rank(0).value: billed}
