"""A tuning job's tally: how its trials ended, its best result so far, what they cost, and
why it stops starting trials or fails (target reached, no improvement, a completion rule, too
many failures). Rules only: the tuning loop writes what they decide to the store."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from scaletune.spec import ObjectiveType, TuningJobSpec
from scaletune.store import JobStatus
from scaletune.tuning._completion import CompletionRule, SearchHistory, completion_rules


@dataclass(frozen=True)
class TuningProgress:
    """For a live display: how many trials are where, and the best so far."""

    running: int
    completed: int
    stopped: int
    failed: int
    max_jobs: int
    best: float | None
    paused: int = 0  # waiting for a promotion (promotion-type Hyperband)


@dataclass
class Tally:
    maximize: bool
    target: float | None = None  # target_objective: reaching it halts the job
    patience: int | None = None  # max_jobs_without_improvement
    max_failed: int | None = None  # max_failed_trials: reaching it fails the job
    rules: Sequence[CompletionRule] = ()  # [completion]: end once more trials add too little
    outcomes: Counter[JobStatus] = field(default_factory=Counter)
    best: float | None = None
    since_improvement: int = 0  # results since the best, infeasible ones included
    history: SearchHistory = field(default_factory=SearchHistory)
    halt_reason: str | None = None  # set when no more trials should start
    failure_reason: str | None = None  # set when the tuning job itself fails

    @classmethod
    def of_spec(cls, spec: TuningJobSpec) -> Tally:
        return cls(
            maximize=spec.objective_type is ObjectiveType.MAXIMIZE,
            target=spec.target_objective,
            patience=spec.max_jobs_without_improvement,
            max_failed=spec.max_failed_trials,
            rules=completion_rules(spec.completion),
        )

    def halt(self, reason: str) -> None:
        """No more trials start; the first reason given is the one kept."""
        self.halt_reason = self.halt_reason or reason

    def failed(self, reason: str | None) -> bool:
        """A trial failed (counted already): True when it is the one that fails the tuning
        job (max_failed_trials reached), which then halts."""
        failed = self.outcomes[JobStatus.FAILED]
        if self.max_failed is None or failed < self.max_failed or self.failure_reason:
            return False
        self.failure_reason = f"max_failed_trials={self.max_failed} reached (the last: {reason})"
        self.halt(self.failure_reason)
        return True

    def consider(self, value: float, feasible: bool = True) -> bool:
        """A trial's result: True when it is the best so far. It counts only if it meets the
        constraints (an infeasible trial is no better than no trial)."""
        better = feasible and (
            self.best is None or (self._as_good(value, self.best) and value != self.best)
        )
        if better:
            self.best, self.since_improvement = value, 0
        else:
            self.since_improvement += 1
        target = self.target
        if target is not None and feasible and self._as_good(value, target):
            self.halt(f"target_objective={target:g} reached")
        if self.patience is not None and self.since_improvement >= self.patience:
            self.halt(f"no improvement in {self.patience} jobs")
        return better

    def spent(
        self, job_id: str, billable_seconds: float, value: float | None, feasible: bool = True
    ) -> None:
        """A trial ended (or paused) with this result (None: none) having cost this much in
        all: the completion rules judge what more trials can be expected to add."""
        gain = None if value is None or not feasible else value if self.maximize else -value
        self.history.add(job_id, billable_seconds, gain)
        outlook = self.history.outlook() if self.rules and self.halt_reason is None else None
        if outlook is None:
            return
        for rule in self.rules:
            reason = rule.verdict(outlook)
            if reason is not None:
                self.halt(reason)
                return

    def _as_good(self, value: float, than: float) -> bool:
        return value >= than if self.maximize else value <= than

    def progress(self, *, running: int, paused: int, max_jobs: int) -> TuningProgress:
        return TuningProgress(
            running=running,
            completed=self.outcomes[JobStatus.COMPLETED],
            stopped=self.outcomes[JobStatus.STOPPED],
            failed=self.outcomes[JobStatus.FAILED],
            max_jobs=max_jobs,
            best=self.best,
            paused=paused,
        )
