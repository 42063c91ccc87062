"""What a tuning job starts next, up to its limits: a trial its machine's notice paused,
then one the scheduler promotes, then a new proposal. A copy of another trial (PBT) whose
donor's checkpoint is not usable yet (its reports still on their way to the store, the one
before it pruned) waits for it, a while, rather than fail."""

from __future__ import annotations

from collections.abc import Callable

from scaletune.errors import CheckpointNotReadyError, InvalidInputError
from scaletune.spec import CapacityPlan, RungPlacement, StartFrom, TuningJobSpec
from scaletune.store import JobStatus, Store
from scaletune.tuning._runners import TrialRunner
from scaletune.tuning._searchers import Suggestion
from scaletune.tuning._trial_table import TrialTable

# How long a copy waits, at most, for a running donor's checkpoint to be usable: its reports
# reach the store within a flush (0.5 s). An ended donor's are all stored: no wait.
DONOR_WAIT_SECONDS = 60.0


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
        # A copy proposed whose donor's checkpoint was not usable yet, and since when.
        self._waiting: tuple[Suggestion, float] | None = None

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
            if self._waiting is not None:
                waiting, since = self._waiting
                self._waiting = None
                if not self._start(waiting, since):
                    break  # its donor's checkpoint is still on its way: the next round
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
            if not self._start(suggestion, self._now()):
                break
        if self._waiting is not None and tally.halt_reason is None:
            return True
        with table.lock:
            return tally.halt_reason is None and search.may_propose(
                self.proposed, self._spec.max_jobs
            )

    def _start(self, suggestion: Suggestion, proposed_at: float) -> bool:
        """Start the proposed trial, or record it as one that could not start; False when
        it waits instead (a copy whose donor's checkpoint is not usable yet)."""
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
        except CheckpointNotReadyError as exc:
            # A donor still running has reports on their way; one that ended has none.
            donor_runs = parent is not None and parent in table.running
            if donor_runs and self._now() - proposed_at < DONOR_WAIT_SECONDS:
                self._waiting = (suggestion, proposed_at)
                return False
            table.unstartable(job_id, suggestion, exc)
        except InvalidInputError as exc:  # recorded as a failed trial; the tuning goes on
            table.unstartable(job_id, suggestion, exc)
        else:
            table.start(number, job_id, full)
        return True

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
