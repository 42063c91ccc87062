"""Learning curves: what a simulated trial reports, when, and how it ends."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from scaletune.errors import InvalidInputError
from scaletune.store import JobStatus


@dataclass(frozen=True)
class CurvePoint:
    """One report: its step, its metrics, and when it arrives (seconds after the trial began,
    start-up included)."""

    step: int
    seconds: float
    metrics: Mapping[str, float]


@dataclass(frozen=True)
class Curve:
    """A trial's reports in order, and how the trial ends if nothing stops it first."""

    points: Sequence[CurvePoint]
    full_resource: int | None = None  # the steps it runs when nothing stops it, if known
    end_status: JobStatus = JobStatus.COMPLETED
    end_reason: str | None = None
    end_seconds: float | None = None  # when it ends; the last report's time if None
    # Of the first report's time, the start-up (placing workers, loading data): what a
    # paused trial pays again when it resumes from its checkpoint.
    start_seconds: float = 0.0

    def __post_init__(self) -> None:
        previous = 0.0
        for point in self.points:
            if point.seconds < previous:
                raise InvalidInputError(
                    f"curve: report at step {point.step} arrives at {point.seconds:g} s, "
                    f"before the one before it ({previous:g} s)"
                )
            previous = point.seconds

    @property
    def ends_at(self) -> float:
        if self.end_seconds is not None:
            return self.end_seconds
        return self.points[-1].seconds if self.points else 0.0


class CurveSource(Protocol):
    def curve(self, hyperparameters: Mapping[str, object], instance_count: int) -> Curve:
        """The curve of a trial with these hyperparameters on this many workers."""
        ...


@dataclass(frozen=True)
class ClusterCosts:
    """What running on N workers costs in simulated time, for sources that give one worker's
    time per step: a fixed start-up per trial (placing workers, loading data), and each
    worker beyond the first adding `scaling_efficiency` of one worker's speed."""

    start_seconds: float = 2.0
    scaling_efficiency: float = 0.9
    step_seconds_floor: float = field(default=1e-3, repr=False)  # surrogates can say 0

    def __post_init__(self) -> None:
        if self.start_seconds < 0:
            raise InvalidInputError(f"start_seconds must be 0 or more (got {self.start_seconds})")
        if not 0 <= self.scaling_efficiency <= 1:
            raise InvalidInputError(
                f"scaling_efficiency must be within [0, 1] (got {self.scaling_efficiency})"
            )

    def arrival_seconds(self, single_worker_seconds: Sequence[float], workers: int) -> list[float]:
        """When each step's report arrives, given one worker's cumulative time at each step."""
        speedup = 1.0 + (workers - 1) * self.scaling_efficiency
        arrivals, previous, elapsed = [], 0.0, self.start_seconds
        for cumulative in single_worker_seconds:
            elapsed += max(cumulative - previous, self.step_seconds_floor) / speedup
            previous = max(previous, cumulative)
            arrivals.append(elapsed)
        return arrivals
