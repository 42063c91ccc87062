"""Population-based training in generations, as Ray Tune's `synch=True` runs it.

Every member is ranked at the same steps, the multiples of `perturbation_interval`, once the
whole population has got there: a member that arrives first waits at that step (its verdict
held) for the others. The ranking so compares every member at one step, whatever their
speeds or wherever a copy started, and it decides the same on a busy machine as on an idle
one. Asynchronous PBT ranks a member among those running at its own steps: members that do
not overlap in time are never compared.

Its population trains side by side (the spec refuses one larger than `max_parallel_jobs`), so
no member waits on one that has not started."""

from __future__ import annotations

from typing import Any

from scaletune.tuning._pbt import PopulationBasedTraining
from scaletune.tuning._schedulers import CONTINUE, HOLD, Decided, Verdict

# Where a trial's length is not known (a script's), its judged steps are its first
# generations, this many: past them it is still ranked, only not held at each.
UNKNOWN_LENGTH_GENERATIONS = 100


class SynchronousPopulationBasedTraining(PopulationBasedTraining):
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        """As `PopulationBasedTraining`'s."""
        super().__init__(*args, **kwargs)
        # Each open generation: the members that got there, with their value at its step
        # (or at the first step they reported past it).
        self._generations: dict[int, dict[int, float]] = {}
        self._closed = 0  # the last generation decided
        self._decided: list[Decided] = []

    @property
    def _interval(self) -> int:
        return self._settings.perturbation_interval

    def judged_steps(self, full_resource: int | None) -> frozenset[int]:
        """The generations' steps below the trial's end (there it finishes by itself)."""
        end = (
            full_resource
            if full_resource is not None
            else self._interval * (UNKNOWN_LENGTH_GENERATIONS + 1)
        )
        return frozenset(range(self._interval, end, self._interval))

    def on_report(self, trial: int, step: int, value: float) -> Verdict:
        if trial not in self._running:
            return CONTINUE  # exploited already: it is stopping
        self._latest[trial], self._step[trial] = value, step
        if self._restoring:  # replayed: the generations it passed are behind the population
            self._closed = max(self._closed, step - step % self._interval)
            return CONTINUE
        # A copy takes part from the first generation after its donor's step.
        since = max(self._ready_at.get(trial, 0), self._closed)
        first = since - since % self._interval + self._interval
        for generation in range(first, step + 1, self._interval):
            self._generations.setdefault(generation, {}).setdefault(trial, value)
        held = step >= first and step % self._interval == 0
        self._decide_complete()
        return HOLD if held else CONTINUE

    def on_end(self, trial: int) -> None:
        super().on_end(trial)
        if not self._restoring:
            self._decide_complete()  # the others may have waited for this one alone

    def take_decided(self) -> list[Decided]:
        decided, self._decided = self._decided, []
        return decided

    def _decide_complete(self) -> None:
        """Rank each generation, oldest first, once every member that takes part is there."""
        while self._generations:
            generation = min(self._generations)
            arrived = self._generations[generation]
            if any(
                member not in arrived and self._ready_at.get(member, 0) < generation
                for member in self._running
            ):
                return
            del self._generations[generation]
            self._closed = generation
            self._decide(generation, {m: v for m, v in arrived.items() if m in self._running})

    def _decide(self, generation: int, values: dict[int, float]) -> None:
        bottom, top = self._quantiles(values)
        for member in sorted(values):
            verdict = CONTINUE
            if member in bottom and self._may_exploit():
                verdict = self._exploit(member, generation, values[member], top)
            self._decided.append(Decided(member, generation, verdict))
