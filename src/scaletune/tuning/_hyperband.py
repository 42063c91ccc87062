"""Hyperband as brackets of asynchronous successive halving (ASHA, Li et al. 2020), in two
kinds: stopping and promotion. Its parts: `_brackets` (the brackets' rungs, weights and each
trial's draw) and `_ranking` (what a rung records: a value or a forecast; how it ranks: by the
value, or by a trade-off of several objectives).

When a trial first reaches a rung, it goes on if its value is among the best max(1, n // eta)
of the n values recorded at that rung of its bracket so far (itself included). If not:
- `StoppingHyperband`: it is stopped for good;
- `PromotionHyperband`: it pauses. Whenever a slot frees, `promote` first looks for a paused
  trial that now ranks among its rung's best n // eta (as later trials fill the rung below
  it, the bar moves), highest rung first, and that one resumes from its checkpoint; only when
  there is none does a new trial start. A trial that ranks at once goes on without pausing.
"""

from __future__ import annotations

import bisect
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import cached_property

import numpy as np

from scaletune.analysis._pareto import Direction
from scaletune.spec import BracketWeights, HyperbandType, ObjectiveType, RankBy
from scaletune.tuning._brackets import Brackets
from scaletune.tuning._ranking import (
    ByTradeOff,
    ByValue,
    ForecastValue,
    Paused,
    RankedValue,
    Ranking,
    ReportedValue,
)
from scaletune.tuning._schedulers import CONTINUE, Decided, Decision, Verdict


@dataclass
class _Bracket:
    rungs: list[int]
    # rung -> values seen, kept sorted (ascending): a rank is one index, not a sort per report
    recorded: dict[int, list[float]] = field(default_factory=dict)
    # rung -> the trials paused there, as (value, trial), sorted (ascending); promotion only
    paused: dict[int, Paused] = field(default_factory=dict)


class HyperbandScheduler(ABC):
    """What both kinds share: the rungs each trial must pass, and the judgement there."""

    def __init__(
        self,
        brackets: Brackets,
        ranked: RankedValue,
        ranking: Ranking,
        *,
        eta: int,
        max_resource: int,
    ) -> None:
        self._layout = brackets
        self.brackets = [_Bracket(rungs) for rungs in brackets.rungs]
        self.ranked, self.ranking = ranked, ranking
        self.eta, self.max_resource = eta, max_resource
        self._next_rung: dict[int, int] = {}  # trial -> index of the next rung it must pass

    def bracket_of(self, trial: int) -> int:
        return self._layout.of(trial)

    def bracket(self, trial: int) -> int | None:
        """The trial's bracket, once drawn (at its first report)."""
        return self._layout.drawn(trial)

    def judged_steps(self, full_resource: int | None) -> frozenset[int]:
        """Every bracket's rungs below max_resource (there a trial finishes by itself)."""
        return frozenset(
            rung for rungs in self._layout.rungs for rung in rungs if rung < self.max_resource
        )

    def take_decided(self) -> list[Decided]:
        return []  # a rung's verdict is decided on the trial's own report

    def bracket_weights(self) -> np.ndarray:
        """The chance of drawing each bracket now (`_brackets`)."""
        return self._layout.weights.now()

    def on_report(
        self, trial: int, resource: int, value: float, others: Sequence[float] = ()
    ) -> Verdict:
        self._layout.weights.measure(trial, resource, value)
        if resource >= self.max_resource:
            self._went_on(trial)
            return Verdict(Decision.FINISH, f"reached max_resource={self.max_resource}")
        number = self.bracket_of(trial)
        bracket = self.brackets[number]
        index = self._next_rung.setdefault(trial, 0)
        if index < len(bracket.rungs):  # past them: nothing to rank it by again
            self.ranked.seen(trial, resource, value)
        if index >= len(bracket.rungs) or resource < bracket.rungs[index]:
            return CONTINUE
        self._went_on(trial)
        rung = bracket.rungs[index]
        self._next_rung[trial] = index + 1
        judged = self.ranked.at_rung(trial, value, later=bracket.rungs[index + 1 :])
        if judged is None:
            return CONTINUE  # too few reports to forecast yet: this rung judges nothing
        values = bracket.recorded.setdefault(rung, [])
        bisect.insort(values, judged.value)
        keep = max(1, len(values) // self.eta)
        self.ranking.add((number, rung), trial, judged.value, others)
        if self.ranking.passes((number, rung), values, trial, judged.value, keep):
            return CONTINUE
        reason = (
            f"bracket {number} rung {rung}: {judged.label}{judged.value:.6g} "
            f"not in the best {keep} of {len(values)}"
        )
        return self._below_the_bar(trial, number, rung, judged.value, reason)

    @abstractmethod
    def promote(self) -> int | None:
        """A paused trial to resume now, if the kind pauses any."""

    @abstractmethod
    def on_resumed(self, trial: int) -> None:
        """A trial goes on after a restart (where it was paused, it counts as promoted)."""

    def on_end(self, trial: int) -> None:
        self._next_rung.pop(trial, None)
        self.ranked.forget(trial)
        self._went_on(trial)

    @abstractmethod
    def _below_the_bar(
        self, trial: int, number: int, rung: int, value: float, reason: str
    ) -> Verdict:
        """The verdict on a trial not among the best at a rung of its bracket."""

    @abstractmethod
    def _went_on(self, trial: int) -> None:
        """The trial goes on past where it may have been paused."""


class StoppingHyperband(HyperbandScheduler):
    """A trial below the bar at a rung is stopped for good."""

    def _below_the_bar(
        self, trial: int, number: int, rung: int, value: float, reason: str
    ) -> Verdict:
        return Verdict(Decision.STOP, reason)

    def promote(self) -> int | None:
        return None  # nothing pauses

    def on_resumed(self, trial: int) -> None:
        pass

    def _went_on(self, trial: int) -> None:
        pass


class PromotionHyperband(HyperbandScheduler):
    """A trial below the bar at a rung pauses, to be promoted once it ranks (module doc)."""

    @cached_property
    def _paused_at(self) -> dict[int, tuple[int, int, float]]:
        """Each paused trial's bracket, rung and value."""
        return {}

    @property
    def paused(self) -> list[int]:
        """The trials paused now, waiting for a promotion."""
        return list(self._paused_at)

    def promote(self) -> int | None:
        """A paused trial that now ranks among its rung's best n // eta, to resume now (the
        highest rung first, the best within it); None if there is none."""
        chosen: tuple[int, int] | None = None  # rung, trial
        for number, bracket in enumerate(self.brackets):
            for rung, paused in bracket.paused.items():
                if not paused or (chosen is not None and rung <= chosen[0]):
                    continue
                values = bracket.recorded[rung]
                keep = len(values) // self.eta
                if keep < 1:
                    continue
                for value, trial in self.ranking.candidates(paused):
                    if self.ranking.passes((number, rung), values, trial, value, keep):
                        chosen = (rung, trial)
                        break
        if chosen is None:
            return None
        self._went_on(chosen[1])
        return chosen[1]

    def on_resumed(self, trial: int) -> None:
        """A paused trial goes on (resumed after a restart): it counts as promoted."""
        self._went_on(trial)

    def _below_the_bar(
        self, trial: int, number: int, rung: int, value: float, reason: str
    ) -> Verdict:
        bisect.insort(self.brackets[number].paused.setdefault(rung, []), (value, trial))
        self._paused_at[trial] = (number, rung, value)
        return Verdict(Decision.PAUSE, f"{reason}: paused until it is")

    def _went_on(self, trial: int) -> None:
        where = self._paused_at.pop(trial, None)
        if where is not None:
            number, rung, value = where
            self.brackets[number].paused[rung].remove((value, trial))


def hyperband_scheduler(
    objective: ObjectiveType,
    *,
    min_resource: int,
    max_resource: int,
    eta: int = 3,
    seed: int = 0,
    brackets: int | None = None,
    kind: HyperbandType = HyperbandType.STOPPING,
    bracket_weights: BracketWeights = "hyperband",
    rank_by: RankBy = "value",
    objectives: Sequence[Direction] | None = None,
) -> HyperbandScheduler:
    """A Hyperband scheduler of the `kind` asked, made of the parts its settings name; with
    several `objectives` (the primary first) a rung ranks by trade-off, else by value."""
    layout = Brackets(
        min_resource=min_resource,
        max_resource=max_resource,
        eta=eta,
        seed=seed,
        count=brackets,
        weights=bracket_weights,
    )
    ranked: RankedValue = ForecastValue(max_resource) if rank_by == "forecast" else ReportedValue()
    ranking: Ranking = (
        ByTradeOff(objectives, seed)
        if objectives and len(objectives) > 1
        else ByValue(objective is ObjectiveType.MAXIMIZE)
    )
    scheduler = PromotionHyperband if kind is HyperbandType.PROMOTION else StoppingHyperband
    return scheduler(layout, ranked, ranking, eta=eta, max_resource=max_resource)
