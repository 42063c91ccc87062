"""Completion rules: when more trials would add too little, a tuning job ends before max_jobs.

Both rules read one estimate, the improvement of the best that the next trials can be
expected to bring. For n results drawn alike, the next one beats the best with chance
1/(n+1), and then by the gap between the two best of the n+1: so the expected improvement
of one more trial is the expected top gap over n+1, whatever the results' distribution. The
gap is estimated as the mean excess of the best SPACINGS results over the next one (the mean
of i times the i-th spacing): right where the tail is exponential, (SPACINGS+1)/2 times too
large where it is bounded, as an accuracy's is. A searcher that learns beats alike draws,
which the estimate does not see: there it errs towards stopping. Rules only: the tally asks
them after each ended trial and halts the job with the reason the first one gives."""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from scaletune.spec import CompletionSpec

# SageMaker's ConvergenceDetected: "a lack of significant improvement (1% or less)".
SIGNIFICANT_IMPROVEMENT = 0.01
# Ended trials before any rule judges: fewer say nothing of where the search stands.
MIN_ENDED_TRIALS = 10
SPACINGS = 5  # top spacings averaged into the gap estimate
SECONDS_PER_HOUR = 3600.0


@dataclass
class SearchHistory:
    """What the rules need of the trials that ended: how many, what they cost, and the best
    few results (as gains: higher is better, whatever the direction). A trial that pauses
    and goes on counts once, at its latest result and spend."""

    ended: int = 0
    billable_seconds: float = 0.0
    top: list[tuple[float, str]] = field(default_factory=list)  # best first
    _spent: dict[str, float] = field(default_factory=dict)

    def add(self, job_id: str, billable_seconds: float, gain: float | None) -> None:
        earlier = self._spent.get(job_id)
        self.ended += earlier is None
        self.billable_seconds += billable_seconds - (earlier or 0.0)
        self._spent[job_id] = billable_seconds
        if gain is None:  # failed, or infeasible: it cost, and adds no result
            return
        kept = [entry for entry in self.top if entry[1] != job_id]
        kept.append((gain, job_id))
        kept.sort(key=lambda entry: entry[0], reverse=True)
        self.top = kept[: SPACINGS + 1]

    def outlook(self) -> Outlook | None:
        """What one more trial is expected to add; None until MIN_ENDED_TRIALS have ended
        and enough of them have results."""
        if self.ended < MIN_ENDED_TRIALS or len(self.top) <= SPACINGS:
            return None
        gains = [gain for gain, _ in self.top]
        gap = sum(i * (gains[i - 1] - gains[i]) for i in range(1, SPACINGS + 1)) / SPACINGS
        return Outlook(
            best=gains[0],
            next_trial=gap / (self.ended + 1),
            ended=self.ended,
            seconds_per_trial=self.billable_seconds / self.ended,
        )


@dataclass(frozen=True)
class Outlook:
    best: float  # the best result so far, as a gain
    next_trial: float  # the expected improvement of the best by one more trial
    ended: int
    seconds_per_trial: float  # billable, on average so far

    @property
    def as_many_again(self) -> float:
        """The expected improvement from as many trials again as have ended: the sum of the
        next ones', each at most the one before's (1/(n+1) + ... + 1/(2n) is about ln 2)."""
        return self.next_trial * (self.ended + 1) * math.log(2.0)


class CompletionRule(ABC):
    @abstractmethod
    def verdict(self, outlook: Outlook) -> str | None:
        """Why the job should end now, or None to go on."""


class Convergence(CompletionRule):
    """SageMaker's ConvergenceDetected as documented, "a lack of significant improvement (1%
    or less)": as many trials again as have ended are expected to improve the best by 1 % of
    it or less."""

    def verdict(self, outlook: Outlook) -> str | None:
        scale = abs(outlook.best)
        if outlook.as_many_again > SIGNIFICANT_IMPROVEMENT * scale:
            return None
        share = outlook.as_many_again / scale if scale else 0.0
        return (
            f"converged: {outlook.ended} more trials would improve the best by about "
            f"{share:.2%} (1 % or less counts as none)"
        )


@dataclass(frozen=True)
class ImprovementPerCost(CompletionRule):
    """A cost-utility rule: ends once the next trial's expected improvement of the best, per
    billable worker-hour it costs (the average so far), falls below `per_hour`."""

    per_hour: float

    def verdict(self, outlook: Outlook) -> str | None:
        hours = outlook.seconds_per_trial / SECONDS_PER_HOUR
        rate = outlook.next_trial / hours if hours > 0 else math.inf
        if rate >= self.per_hour:
            return None
        return (
            f"min_improvement_per_cost={self.per_hour:g} not met: the next trial would improve "
            f"the best by about {outlook.next_trial:.3g} for {outlook.seconds_per_trial:,.0f} "
            f"billable seconds, {rate:.3g} per worker-hour"
        )


def completion_rules(spec: CompletionSpec) -> Sequence[CompletionRule]:
    rules: list[CompletionRule] = []
    if spec.convergence:
        rules.append(Convergence())
    if spec.min_improvement_per_cost is not None:
        rules.append(ImprovementPerCost(spec.min_improvement_per_cost))
    return rules
