"""What a tuning job starts next, up to its limits: a trial its machine's notice paused,
then one the scheduler promotes, then a new proposal."""

from __future__ import annotations

from collections.abc import Callable

from scaletune.errors import InvalidInputError
from scaletune.spec import CapacityPlan, RungPlacement, StartFrom, TuningJobSpec
from scaletune.store import JobStatus, Store
from scaletune.tuning._runners import TrialRunner
from scaletune.tuning._searchers import Suggestion
from scaletune.tuning._trial_table import TrialTable


class TrialLauncher:
    def __init__(
        self,
        tuning_id: str,
        spec: TuningJobSpec,
        store: Store,
        runner: TrialRunner,
        table: TrialTable,
        now: Callable[[], float],
    ) -> None:
        self._id, self._spec, self._store, self._runner = tuning_id, spec, store, runner
        self._table, self._now = table, now
        self.proposed = 0  # trials proposed so far, the ones that could not start included

    def launch_more(self, lease_held: Callable[[], bool]) -> bool:
        """Start trials up to the limits, a paused one before any new one; False once no
        new one will ever start (promotions may still come while trials run). The lease is
        renewed before each start: never one trial too many."""
        table, search, tally = self._table, self._table.search, self._table.tally
        while (
            tally.halt_reason is None
            and len(table.running) < self._spec.max_parallel_jobs
            and lease_held()
        ):
            if table.preempted:
                number = min(table.preempted)
                self._resume(number, table.preempted.pop(number))
                continue
            with table.lock:
                promoted = search.scheduler.promote()
            if promoted is not None:
                self._resume(promoted, table.paused.pop(promoted), self._promoted_capacity)
                continue
            if self.proposed >= self._spec.max_jobs:
                break
            with table.lock:
                suggestion = search.searcher.suggest()
            if suggestion is None:
                if search.exhausted():
                    tally.halt_reason = "the search space is exhausted"
                break
            self.proposed += 1
            self._start(suggestion)
        with table.lock:
            return tally.halt_reason is None and search.may_propose(
                self.proposed, self._spec.max_jobs
            )

    def _start(self, suggestion: Suggestion) -> None:
        table, number = self._table, suggestion.number
        job_id, parent = table.job_id(number), suggestion.parent
        try:
            training = self._spec.trial_spec(
                suggestion.config,
                None if parent is None else StartFrom(job=table.job_id(parent)),
            )
            full = self._runner.prepare(
                training, job_id=job_id, tuning_job_id=self._id, trial_number=number
            )
        except InvalidInputError as exc:  # recorded as a failed trial; the tuning goes on
            table.unstartable(job_id, suggestion, exc)
            return
        table.start(number, job_id, full)

    @property
    def _promoted_capacity(self) -> CapacityPlan | None:
        """Where a promoted trial goes on: on-demand with Hyperband's placement "rungs"."""
        hyperband = self._spec.hyperband
        if hyperband is not None and hyperband.placement is RungPlacement.RUNGS:
            return CapacityPlan.ON_DEMAND
        return None

    def _resume(self, number: int, job_id: str, capacity: CapacityPlan | None = None) -> None:
        """A paused trial (promoted, or preempted) goes on from its checkpoint: the same job,
        a new attempt (on `capacity` if given)."""
        table = self._table
        record = self._store.get_training_job(job_id)
        if record.status is not JobStatus.PAUSED:  # ended meanwhile (`jobs stop`)
            table.ended_while_paused(number, record.status)
            return
        try:
            full = self._runner.prepare_resume(job_id, number, capacity)
        except InvalidInputError as exc:  # its data moved, say: it ends here, Failed
            self._store.abandon_training_job(
                job_id, JobStatus.FAILED, f"promoted, but could not resume: {exc}", self._now()
            )
            table.ended_while_paused(number, JobStatus.FAILED)
            table.count_failure(f"could not resume: {exc}")
            return
        table.start(number, job_id, full)
