"""A tuning job's trials as its loop keeps them (running, paused for a promotion, paused by
their machine's notice), and what each trial's start, reports and end tell the search, the
tally and the store."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from scaletune.analysis._objectives import Goals, TrialCosts
from scaletune.analysis._values import seconds_per_step
from scaletune.clock import Clock
from scaletune.errors import InvalidInputError
from scaletune.spec import TuningJobSpec
from scaletune.spec._names import CLUSTER_SIZE
from scaletune.store import JobOutcome, JobStatus, NewTrainingJob, Store, TrainingJobRecord
from scaletune.training import Stopper
from scaletune.tuning._runners import TrialRunner
from scaletune.tuning._running_cost import BillableSoFar, fixed_size, resized
from scaletune.tuning._schedulers import Decision, Verdict
from scaletune.tuning._searchers import Suggestion, TrialResult
from scaletune.tuning._strategy import Search
from scaletune.tuning._tally import Tally
from scaletune.worker import Report

PAUSE_GRACE_SECONDS = 30.0


@dataclass
class RunningTrial:
    number: int
    job_id: str
    stopper: Stopper
    full_resource: int | None  # steps it runs when nothing stops it, where known
    # What several objectives need at each report: when this attempt started (monotonic),
    # the seconds its earlier attempts ran, its cost by then, its metrics' latest values.
    started: float = 0.0
    earlier_seconds: float = 0.0
    billable: BillableSoFar = field(default_factory=lambda: fixed_size(1))
    latest: dict[str, float] = field(default_factory=dict)


class TrialTable:
    def __init__(
        self,
        tuning_id: str,
        spec: TuningJobSpec,
        store: Store,
        runner: TrialRunner,
        clock: Clock,
        search: Search,
        goals: Goals,
        tally: Tally,
    ) -> None:
        self._id, self._spec, self._store, self._runner = tuning_id, spec, store, runner
        self._clock, self.search, self.goals, self.tally = clock, search, goals, tally
        # A parameter-server job's chief and servers run beside its workers, whatever its size.
        self.extra_tasks = spec.training.task_count - spec.training.instance_count
        self.lock = threading.Lock()  # searcher and scheduler are used from trial threads
        self.running: dict[int, RunningTrial] = {}
        self.paused: dict[int, str] = {}  # trial number -> job id, waiting for a promotion
        # Paused by a preemption notice, not by the scheduler: resumed before anything else.
        self.preempted: dict[int, str] = {}

    def job_id(self, number: int) -> str:
        return f"{self._id}-{number:03d}"

    # -- starts ------------------------------------------------------------------------------

    def start(self, number: int, job_id: str, full: int | None) -> None:
        """A prepared trial's job starts in its own thread, judged at each report."""
        stopper = Stopper()
        trial = RunningTrial(number, job_id, stopper, full, started=self._clock.monotonic())
        if self.goals.is_multi_objective:  # its costs so far count at each rung
            record = self._store.get_training_job(job_id)
            trial.earlier_seconds = record.wall_seconds or 0.0
            trial.billable = (
                fixed_size(record.instance_count + self.extra_tasks)
                if record.size_range is None  # an elastic trial's, at the sizes it ran at
                else resized(lambda: self._store.attempts.of(job_id), self._clock.time)
            )
        self.running[number] = trial
        self._runner.start(
            number, stopper, lambda report: self._judge(number, stopper, report, full)
        )

    def unstartable(self, job_id: str, suggestion: Suggestion, error: InvalidInputError) -> None:
        """A trial whose job could not even start is still a record (and counts to max_jobs)."""
        now = self._clock.time()
        training = self._spec.training
        config = dict(suggestion.config)
        size = config.pop(CLUSTER_SIZE, None)
        self._store.create_training_job(
            NewTrainingJob(
                id=job_id,
                name=training.name,
                algorithm=training.algorithm,
                spec=training.model_dump(mode="json"),
                hyperparameters={**training.hyperparameters, **config},
                instance_count=size if isinstance(size, int) else training.instance_count,
                created_at=now,
                log_dir="",
                tuning_job_id=self._id,
                trial_number=suggestion.number,
            )
        )
        self._store.finish_training_job(
            job_id,
            JobOutcome(
                JobStatus.FAILED, now, now, 0.0, 0.0, {}, failure_reason=f"could not start: {error}"
            ),
        )
        with self.lock:
            self.search.searcher.observe(TrialResult(suggestion.number, None))
            # Ended before it began: a synchronous population no longer waits for it.
            self.search.scheduler.on_end(suggestion.number)
            self._apply_decided()
        self.tally.outcomes[JobStatus.FAILED] += 1
        self.count_failure(f"could not start: {error}")

    # -- reports -----------------------------------------------------------------------------

    def _judge(self, number: int, stopper: Stopper, report: Report, full: int | None) -> None:
        """Runs in the trial's thread for every report: the scheduler decides."""
        value = report.metrics.get(self._spec.objective_metric)
        if value is None or stopper.is_set():  # what it reports while it stops changes nothing
            return
        others: tuple[float, ...] = ()
        trial = self.running.get(number)
        if self.goals.is_multi_objective and trial is not None:
            trial.latest.update(report.metrics)
            elapsed = trial.earlier_seconds + self._clock.monotonic() - trial.started
            others = self.goals.standing(trial.latest, elapsed, trial.billable(elapsed))
        with self.lock:
            self.search.searcher.on_report(number, report.step, value)
            verdict = self.search.scheduler.on_report(number, report.step, value, others)
            if verdict.decision is Decision.HOLD:
                # Held under the lock: whichever report decides it releases it after.
                stopper.verdicts.hold(report.step)
            self._apply_decided()
        _apply(verdict, stopper, report.step, full)

    def _apply_decided(self) -> None:
        """The held verdicts the scheduler has decided (the lock held): each trial's stop is
        requested before its step is released, so that it lands at that step."""
        for decided in self.search.scheduler.take_decided():
            trial = self.running.get(decided.trial)
            if trial is None:  # it ended meanwhile
                continue
            _apply(decided.verdict, trial.stopper, decided.step, trial.full_resource)
            trial.stopper.verdicts.release(decided.step)

    # -- ends --------------------------------------------------------------------------------

    def finish(self, number: int) -> None:
        """A trial's job ended (or paused): what it reached is learnt and counted."""
        trial = self.running.pop(number, None)
        if trial is None:
            return
        record = self._store.get_training_job(trial.job_id)
        paused = record.status is JobStatus.PAUSED
        if paused and not trial.stopper.is_set():  # its machine's notice, not the scheduler's
            self.preempted[number] = trial.job_id  # it goes on: nothing to learn from yet
            return
        if paused:
            self.paused[number] = trial.job_id
        else:
            self.tally.outcomes[record.status] += 1
        if record.status is JobStatus.FAILED:
            self.count_failure(record.failure_reason)
        value, resource = self.result(
            trial.job_id, trial.full_resource, number, started=record.start_time
        )
        result = self.trial_result(number, record, value, resource)
        with self.lock:
            # A pause is a result too: the searcher learns from it now, and again if the
            # trial is promoted and ends later.
            self.search.searcher.observe(result)
            if not paused:
                self.search.scheduler.on_end(number)
                self._apply_decided()  # the held may have waited for this one alone
        feasible = self.feasible(record)
        if result.value is not None:
            self.consider(trial.job_id, result.value, feasible)
        self.tally.spent(trial.job_id, record.billable_seconds or 0.0, result.value, feasible)

    def ended_while_paused(self, number: int, status: JobStatus) -> None:
        """A paused trial will not go on: it ended meanwhile, or could not resume."""
        self.tally.outcomes[status] += 1
        with self.lock:
            self.search.scheduler.on_end(number)
            self._apply_decided()

    def end_paused(self) -> None:
        """The trials still paused when the tuning job ends will not go on: Stopped."""
        waiting = self.paused | self.preempted
        if not waiting:
            return
        self._store.end_paused_trials(self._id, "; not promoted before the tuning job ended")
        self.tally.outcomes[JobStatus.STOPPED] += len(waiting)
        with self.lock:
            for number in waiting:
                self.search.scheduler.on_end(number)
            self._apply_decided()
        self.paused.clear()
        self.preempted.clear()

    def stop_all(self, reason: str) -> None:
        for trial in self.running.values():
            trial.stopper.request(JobStatus.STOPPED, reason)

    def count_failure(self, reason: str | None) -> None:
        if self.tally.failed(reason):
            self.stop_all("the tuning job failed: too many of its trials failed")

    # -- results -----------------------------------------------------------------------------

    def result(
        self,
        job_id: str,
        full_resource: int | None = None,
        number: int | None = None,
        started: float | None = None,
    ) -> tuple[float | None, int | None]:
        """A trial's objective: its last reported value, and the step it was reported at;
        recorded with what the tuning job's cost estimate needs of it (its speed from its own
        reports since it `started`: a PBT copy's first ones are its parent's), and its
        bracket."""
        series = self._store.metrics(job_id, self._spec.objective_metric)
        value = series[-1].value if series else None
        resource = series[-1].step if series else None
        own = [p for p in series if started is None or p.time >= started]
        self._store.set_trial_result(
            job_id,
            value,
            resource,
            seconds_per_step=seconds_per_step(own),
            full_resource=full_resource,
            bracket=None if number is None else self.search.scheduler.bracket(number),
        )
        return value, resource

    def trial_result(
        self, number: int, trial: TrainingJobRecord, value: float | None, resource: int | None
    ) -> TrialResult:
        """What the searcher learns of an ended (or paused) trial whose objective was last
        `value` at step `resource`."""
        others, violations = self.goals.outcome(TrialCosts.of(trial))
        return TrialResult(
            number,
            None if trial.status is JobStatus.FAILED else value,
            resource=resource,
            stopped_early=trial.status in (JobStatus.STOPPED, JobStatus.PAUSED),
            others=others,
            violations=violations,
        )

    def feasible(self, trial: TrainingJobRecord) -> bool:
        return self.goals.feasible(TrialCosts.of(trial))

    def consider(self, job_id: str, value: float, feasible: bool = True) -> None:
        if self.tally.consider(value, feasible):
            self._store.set_tuning_best(self._id, job_id, value)


def _apply(verdict: Verdict, stopper: Stopper, step: int, full: int | None) -> None:
    """What a verdict at `step` asks of its trial's job."""
    if verdict.decision is Decision.STOP:
        stopper.request(JobStatus.STOPPED, verdict.reason or "stopped early", early=True)
    elif verdict.decision is Decision.PAUSE:
        # A pause is worth its checkpoint alone: the program gets longer than a stop's grace
        # to save one (Ray actors on a busy machine took more than 5 s, and a trial killed
        # unsaved was promoted from scratch). A program that checks ends at once.
        stopper.request(
            JobStatus.PAUSED, verdict.reason or "paused", grace_seconds=PAUSE_GRACE_SECONDS
        )
    elif verdict.decision is Decision.FINISH and (full is None or step < full):
        # A trial that ends at this step anyway finishes by itself, model and all.
        stopper.request(JobStatus.COMPLETED, verdict.reason or "finished")
