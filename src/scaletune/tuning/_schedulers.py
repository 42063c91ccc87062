"""Schedulers decide, on every report of the objective, whether a trial goes on."""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from scaletune.spec import ObjectiveType


class Decision(StrEnum):
    CONTINUE = "Continue"
    STOP = "Stop"  # stopped early: its status is Stopped
    FINISH = "Finish"  # reached its full budget (max_resource): its status is Completed
    PAUSE = "Pause"  # its workers are freed and its checkpoint kept, until it is promoted
    # Not decided yet: it waits on other trials' reports at this step (synchronous PBT); the
    # verdict comes later, from `Scheduler.take_decided`.
    HOLD = "Hold"


@dataclass(frozen=True)
class Verdict:
    decision: Decision
    reason: str | None = None


CONTINUE = Verdict(Decision.CONTINUE)
HOLD = Verdict(Decision.HOLD)


@dataclass(frozen=True)
class Decided:
    """A verdict on a report that was held: `trial`'s at `step`."""

    trial: int
    step: int
    verdict: Verdict


class Scheduler(Protocol):
    def on_report(
        self, trial: int, resource: int, value: float, others: Sequence[float] = ()
    ) -> Verdict:
        """A trial reported `value` of the objective after `resource` units (step); `others`:
        the other objectives as they stood then, where there are several."""
        ...

    def on_end(self, trial: int) -> None:
        """The trial ended (completed, failed or stopped)."""
        ...

    def promote(self) -> int | None:
        """A paused trial to resume now, before any new trial starts; None if there is none."""
        ...

    def on_resumed(self, trial: int) -> None:
        """A trial the scheduler may count as paused goes on (after a restart)."""
        ...

    def bracket(self, trial: int) -> int | None:
        """The trial's bracket, recorded with its result; None where there are none."""
        ...

    def judged_steps(self, full_resource: int | None) -> frozenset[int]:
        """The steps whose reports a trial waits on until judged: where this scheduler may
        stop or pause it. None where it may at any step: waiting at each would slow all.
        `full_resource`: the trial's steps when nothing stops it, where known."""
        ...

    def take_decided(self) -> list[Decided]:
        """The verdicts on held reports decided since it was last asked, oldest first (a
        report or an end of one trial may decide those of others)."""
        ...


class _NeverPauses:
    """For schedulers that only continue or stop: no promotions, no brackets."""

    def promote(self) -> int | None:
        return None

    def on_resumed(self, trial: int) -> None:
        pass

    def bracket(self, trial: int) -> int | None:
        return None

    def judged_steps(self, full_resource: int | None) -> frozenset[int]:
        return frozenset()  # FIFO decides nothing; the median rule, at any step

    def take_decided(self) -> list[Decided]:
        return []  # every verdict is decided on its report


class FIFOScheduler(_NeverPauses):
    """Every trial runs to the end."""

    def on_report(
        self, trial: int, resource: int, value: float, others: Sequence[float] = ()
    ) -> Verdict:
        return CONTINUE

    def on_end(self, trial: int) -> None:
        pass


class MedianStoppingScheduler(_NeverPauses):
    """Stop a trial whose best value so far is worse than the median, at the same step, of the
    running averages of trials that got that far (Golovin et al. 2017, "Vizier")."""

    def __init__(
        self, objective: ObjectiveType, *, grace_resource: int = 1, min_trials: int = 3
    ) -> None:
        self._maximize = objective is ObjectiveType.MAXIMIZE
        self._grace = grace_resource
        self._min_trials = min_trials
        self._history: dict[int, dict[int, float]] = {}

    def on_report(
        self, trial: int, resource: int, value: float, others: Sequence[float] = ()
    ) -> Verdict:
        # The median of the objective alone: with several, the others do not stop a trial.
        mine = self._history.setdefault(trial, {})
        mine[resource] = value
        if resource < self._grace:
            return CONTINUE
        averages = [
            statistics.fmean(v for step, v in history.items() if step <= resource)
            for other, history in self._history.items()
            if other != trial and max(history) >= resource
        ]
        if len(averages) < self._min_trials:
            return CONTINUE
        median = statistics.median(averages)
        best = max(mine.values()) if self._maximize else min(mine.values())
        worse = best < median if self._maximize else best > median
        if worse:
            return Verdict(
                Decision.STOP,
                f"best {best:.6g} at step {resource} is worse than "
                f"the median {median:.6g} of {len(averages)} trials",
            )
        return CONTINUE

    def on_end(self, trial: int) -> None:
        pass  # its history keeps counting for later trials
