"""The Tuner loop: it only orchestrates. Searchers propose, schedulers decide, jobs train.

Past 400 lines: `_Run` is one tuning job's trials (running, paused, to resume) and the steps
that start, judge and end them, each of which reads and changes those; the rules it tallies
by (_tally) and what it learns again from the store (_restore) live apart."""

from __future__ import annotations

import contextlib
import os
import socket
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pydantic import ValidationError

from scaletune.analysis._objectives import TrialCosts
from scaletune.analysis._values import seconds_per_step, tuned_value
from scaletune.clock import Clock, SystemClock
from scaletune.errors import InvalidInputError, ScaletuneError
from scaletune.spec import (
    CapacityPlan,
    RungPlacement,
    StartFrom,
    TuningJobSpec,
    describe_validation_error,
)
from scaletune.spec._names import CLUSTER_SIZE
from scaletune.store import (
    JobOutcome,
    JobStatus,
    NewTrainingJob,
    NewTuningJob,
    Store,
    TrainingJobRecord,
    TuningJobRecord,
)
from scaletune.training import (
    Stopper,
    TrainingController,
    process_alive,
    remove_scratch,
    staging_of,
)
from scaletune.training._ids import new_job_id
from scaletune.tuning._hyperband import HyperbandScheduler
from scaletune.tuning._lease import LEASE_SECONDS, TuningLease
from scaletune.tuning._restore import past_reports, warm_start
from scaletune.tuning._runners import JobTrialRunner, TrialRunner
from scaletune.tuning._running_cost import BillableSoFar, fixed_size, resized
from scaletune.tuning._schedulers import Decision, Scheduler
from scaletune.tuning._searchers import Searcher, Suggestion, TrialResult
from scaletune.tuning._strategy import goals_of, make_search
from scaletune.tuning._tally import Tally, TuningProgress
from scaletune.tuning._tracked import end_tracking, start_tracking
from scaletune.worker import Report


@dataclass
class _Trial:
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


PAUSE_GRACE_SECONDS = 30.0


class TuningController:
    """Runs one tuning job: up to max_parallel_jobs training jobs at once, max_jobs in all.

    Trials run as real training jobs (given a TrainingController) or through any other
    TrialRunner, such as the simulated one: the loop, searchers and schedulers are the same.
    """

    def __init__(
        self,
        trials: TrainingController | TrialRunner,
        *,
        clock: Clock | None = None,
        poll_seconds: float = 0.25,
        on_progress: Callable[[TuningProgress], None] | None = None,
        lease_clock: Clock | None = None,
    ) -> None:
        self.runner: TrialRunner = (
            JobTrialRunner(trials) if isinstance(trials, TrainingController) else trials
        )
        self.store: Store = self.runner.store
        self.clock = clock or self.runner.clock
        # Leases are about processes being alive: real time, even when trials are simulated.
        self.lease_clock: Clock = lease_clock or SystemClock()
        self.poll_seconds = poll_seconds
        self.on_progress = on_progress
        # Real trials are tracked (MLflow, TensorBoard) as their training jobs are; simulated
        # ones are curves, not jobs.
        self.tracking = trials.tracking if isinstance(trials, TrainingController) else None

    def create(self, spec: TuningJobSpec) -> str:
        self._check_parents(spec)
        if self.tracking is not None:
            self.tracking.check(spec.tracking)
        tuning_id = new_job_id(spec.name or "tuning", self.clock.time())
        self.store.create_tuning_job(
            NewTuningJob(
                id=tuning_id,
                name=spec.name,
                strategy=spec.strategy.value,
                spec=spec.model_dump(mode="json"),
                created_at=self.clock.time(),
            )
        )
        return tuning_id

    def _check_parents(self, spec: TuningJobSpec) -> None:
        """Warm-start parents must exist, have ended, and have optimised the same objective."""
        for parent_id in spec.warm_start.parents if spec.warm_start else []:
            parent = self.store.get_tuning_job(parent_id)
            if not parent.status.is_terminal:
                raise InvalidInputError(
                    f"warm_start.parents: tuning job {parent_id!r} has not ended "
                    f"({parent.status.value})"
                )
            objective = parent.spec_view.objective
            theirs = (objective.metric, objective.type.value)
            ours = (spec.objective_metric, spec.objective_type.value)
            if theirs != ours:
                raise InvalidInputError(
                    f"warm_start.parents: tuning job {parent_id!r} optimised {theirs[1]} "
                    f"{theirs[0]}, not {ours[1]} {ours[0]}"
                )

    def run(self, tuning_id: str, spec: TuningJobSpec) -> TuningJobRecord:
        """Run to the end. Ctrl-C stops every running trial and the tuning job, then re-raises."""
        return _Run(self, tuning_id, spec).run()

    def resume(self, tuning_id: str) -> TuningJobRecord:
        """Finish a tuning job whose controller died. Its trials that were running go on
        from their latest checkpoints (same trial, a new attempt); the others are neither lost
        nor run again. A trial that cannot go on is recorded as Failed."""
        record = self.store.get_tuning_job(tuning_id)
        if record.status.is_terminal:
            raise InvalidInputError(
                f"tuning job {tuning_id!r} already ended: {record.status.value}"
            )
        here = record.controller_host == socket.gethostname()
        alive_here = here and process_alive(record.controller_pid, record.controller_host)
        if record.status is JobStatus.IN_PROGRESS and alive_here:
            raise InvalidInputError(
                f"tuning job {tuning_id!r} is still running (process {record.controller_pid})"
            )
        # A controller elsewhere cannot be seen from here: its lease tells (one seen dead
        # here need not wait for it to lapse), and two resumes at once cannot both take it.
        lease = TuningLease(self.store, tuning_id, self.lease_clock)
        lease.take(from_dead=record.lease_holder if here and not alive_here else None)
        try:
            spec = TuningJobSpec.model_validate(record.spec)
        except ValidationError as exc:
            raise InvalidInputError(describe_validation_error(exc)) from None
        now = self.clock.time()
        continuing: dict[int, int | None] = {}  # trial number -> its full resource
        for trial in self.store.training_jobs_of(tuning_id):
            if trial.status.has_run:  # ended, or paused: it waits for a promotion as it was
                continue
            remove_scratch(trial.id, staging_of(trial))
            self.store.abandon_training_job(
                trial.id,
                JobStatus.FAILED,
                f"its tuning controller (process {record.controller_pid}) ended",
                now,
            )
            assert trial.trial_number is not None  # trials of a tuning job have numbers
            with contextlib.suppress(InvalidInputError):  # it stays Failed, with that reason
                continuing[trial.trial_number] = self.runner.prepare_resume(
                    trial.id, trial.trial_number
                )
        run = _Run(self, tuning_id, spec, lease)
        run.restore(continuing)
        return run.run()


class _Run:
    """The state of one tuning job while it runs."""

    def __init__(
        self,
        tuner: TuningController,
        tuning_id: str,
        spec: TuningJobSpec,
        lease: TuningLease | None = None,
    ) -> None:
        self.tuner, self.store, self.spec, self.id = tuner, tuner.store, spec, tuning_id
        self.lease = lease or TuningLease(tuner.store, tuning_id, tuner.lease_clock)
        self.searcher: Searcher
        self.scheduler: Scheduler
        self.searcher, self.scheduler, self.population = make_search(
            spec, has_checkpoint=self._has_checkpoint
        )
        self.goals = goals_of(spec)
        # A parameter-server job's chief and servers run beside its workers, whatever its size.
        self.extra_tasks = spec.training.task_count - spec.training.instance_count
        self.runner = tuner.runner
        self.lock = threading.Lock()  # searcher and scheduler are used from trial threads
        self.running: dict[int, _Trial] = {}
        self.paused: dict[int, str] = {}  # trial number -> job id, waiting for a promotion
        # Paused by a preemption notice, not by the scheduler: resumed before anything else.
        self.preempted: dict[int, str] = {}
        self.proposed = 0
        self.tally = Tally.of_spec(spec)
        self.priors = warm_start(self.store, spec, self.searcher)
        # Interrupted trials reopened by a resume: started before any new one.
        self._resumable: dict[int, tuple[str, int | None]] = {}

    def restore(self, continuing: Mapping[int, int | None] | None = None) -> None:
        """Bring searcher, scheduler and best-so-far to where the trials in the store left
        them. `continuing` trials (number -> full resource) were reopened to go on from
        their checkpoints: they count as running, and `run` starts them first."""
        continuing = continuing or {}
        trials = self.store.training_jobs_of(self.id)
        for trial in trials:
            assert trial.trial_number is not None  # trials of a tuning job have numbers
            value, resource = self._result(trial.id, started=trial.start_time)
            tuned = {name: tuned_value(trial, name) for name in self.spec.ranges}
            self.proposed += 1
            if trial.trial_number in continuing:
                self.searcher.restore(trial.trial_number, tuned, None)
                self._resumable[trial.trial_number] = (trial.id, continuing[trial.trial_number])
                continue
            if trial.status is JobStatus.PAUSED:
                self.paused[trial.trial_number] = trial.id
            else:
                self.tally.outcomes[trial.status] += 1
            ended = self._trial_result(trial.trial_number, trial, value, resource)
            self.searcher.restore(trial.trial_number, tuned, ended)
        replayed = past_reports(self.store, self.spec, self.goals, self.extra_tasks, trials)
        for report in replayed:
            self.searcher.on_report(report.number, report.step, report.value)
            self.scheduler.on_report(report.number, report.step, report.value, report.others)
        for number in continuing:
            self.scheduler.on_resumed(number)  # caught paused or just promoted: it goes on
        for trial in sorted(trials, key=lambda t: t.end_time or 0.0):
            if trial.trial_number in continuing:
                continue  # not ended: it goes on
            if trial.status is not JobStatus.PAUSED:  # a paused one waits as it was
                self.scheduler.on_end(trial.trial_number or 0)
            value = None if trial.status is JobStatus.FAILED else trial.objective
            if value is not None:
                self._consider(trial.id, value, self._feasible(trial))
            self.tally.spent(trial.id, trial.billable_seconds or 0.0, value, self._feasible(trial))
        if self.population is not None:
            self.population.restored()

    def _trial_result(
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

    def _feasible(self, trial: TrainingJobRecord) -> bool:
        return self.goals.feasible(TrialCosts.of(trial))

    def _result(
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
        series = self.store.metrics(job_id, self.spec.objective_metric)
        value = series[-1].value if series else None
        resource = series[-1].step if series else None
        own = [p for p in series if started is None or p.time >= started]
        self.store.set_trial_result(
            job_id,
            value,
            resource,
            seconds_per_step=seconds_per_step(own),
            full_resource=full_resource,
            bracket=self.scheduler.bracket(number)
            if isinstance(self.scheduler, HyperbandScheduler) and number is not None
            else None,
        )
        return value, resource

    def run(self) -> TuningJobRecord:
        self.lease.take()  # before anything: one controller runs it (a resume's, taken)
        self.runner.ensure_capacity(self.spec.max_parallel_jobs * self.spec.max_task_count)
        clock = self.tuner.clock
        # A resumed job keeps its first start: its wall time spans the interruption.
        start = self.store.get_tuning_job(self.id).start_time or clock.time()
        started = clock.monotonic() - (clock.time() - start)
        self.store.mark_tuning_in_progress(self.id, start, os.getpid(), socket.gethostname())
        tracking = self.tuner.tracking
        tracker = None if tracking is None else start_tracking(tracking, self.spec, self.id, start)
        status, interrupted = JobStatus.COMPLETED, False
        limit = self.spec.max_runtime_seconds
        deadline = None if limit is None else started + limit
        next_stop_check = started
        try:
            for number, (job_id, full) in sorted(self._resumable.items()):
                self._start_prepared(number, job_id, full)
            self._resumable.clear()
            while self._launch_more() or self.running:
                self._progress()
                remaining = None if deadline is None else deadline - clock.monotonic()
                self._wait_for_a_trial(remaining)
                if self.tally.halt_reason is not None and status is JobStatus.STOPPED:
                    continue  # already stopping: wait for the trials to end
                now, stop_requested = clock.monotonic(), False
                if now >= next_stop_check:  # a store read per report would slow simulations
                    next_stop_check = now + self.tuner.poll_seconds
                    stop_requested = self.store.is_tuning_stop_requested(self.id)
                if not self._lease_held():
                    status = JobStatus.STOPPED  # its ending is the new controller's to write
                elif stop_requested:
                    self.tally.halt_reason, status = "stop requested", JobStatus.STOPPED
                    self._stop_all("the tuning job was stopped")
                elif deadline is not None and clock.monotonic() >= deadline:
                    self.tally.halt_reason = f"max_runtime_seconds={limit:g} reached"
                    status = JobStatus.STOPPED
                    self._stop_all(f"the tuning job reached its {self.tally.halt_reason}")
        except KeyboardInterrupt:
            status, interrupted = JobStatus.STOPPED, True
            self.tally.halt_reason = "interrupted (Ctrl-C)"
            self._stop_all("the tuning job was interrupted")
        finally:
            for number in self.runner.wait_all():
                self._finish_trial(number)
            if not self.lease.lost:  # else its paused trials are the new controller's
                self._end_paused()
            self._progress()  # as it ended: every trial counted
            tally = self.tally
            if tally.failure_reason is not None and status is JobStatus.COMPLETED:
                status = JobStatus.FAILED
            self.store.finish_tuning_job(
                self.id,
                status,
                clock.time(),
                clock.monotonic() - started,
                tally.failure_reason
                if status is JobStatus.FAILED
                else tally.halt_reason
                if status is JobStatus.STOPPED
                else None,
                holder=self.lease.holder,  # nothing written if another controller took over
                completion_reason=self._completion_reason()
                if status is JobStatus.COMPLETED
                else None,
            )
            if tracker is not None:
                end_tracking(tracker, self.store, self.id)
        if interrupted:
            raise KeyboardInterrupt
        if self.lease.lost:
            raise ScaletuneError(
                f"tuning job {self.id!r} was taken over by another controller (this one's "
                f"lease lapsed unrenewed for {LEASE_SECONDS:g} s); its trials here were stopped"
            )
        return self.store.get_tuning_job(self.id)

    def _completion_reason(self) -> str | None:
        """Why a completed job ended when it did: a rule that halted it, else its max_jobs."""
        if self.tally.halt_reason is not None:
            return self.tally.halt_reason
        if self.proposed >= self.spec.max_jobs:
            return f"max_jobs={self.spec.max_jobs} reached"
        return None

    def _progress(self) -> None:
        if self.tuner.on_progress is not None:
            self.tuner.on_progress(
                self.tally.progress(
                    running=len(self.running), paused=len(self.paused), max_jobs=self.spec.max_jobs
                )
            )

    def _launch_more(self) -> bool:
        """Start trials up to the limits, a promoted paused one before any new one; False
        once no new one will ever start (promotions may still come while trials run)."""
        while (
            self.tally.halt_reason is None
            and len(self.running) < self.spec.max_parallel_jobs
            and self._lease_held()  # renewed before a trial starts: never one too many
        ):
            if self.preempted:
                number = min(self.preempted)
                self._resume(number, self.preempted.pop(number))
                continue
            with self.lock:
                promoted = self.scheduler.promote()
            if promoted is not None:
                self._resume(promoted, self.paused.pop(promoted), self._promoted_capacity)
                continue
            if self.proposed >= self.spec.max_jobs:
                break
            with self.lock:
                suggestion = self.searcher.suggest()
            if suggestion is None:
                if self.population is None:
                    self.tally.halt_reason = "the search space is exhausted"
                break  # PBT: a new trial comes when a running one is exploited
            self.proposed += 1
            self._start(suggestion)
        if self.population is not None:
            with self.lock:
                return self.tally.halt_reason is None and self.population.may_propose()
        return self.tally.halt_reason is None and self.proposed < self.spec.max_jobs

    def _lease_held(self) -> bool:
        """Whether this controller still runs the job (its lease renewed when due); once
        another has taken over, no trial starts here and the running ones are stopped."""
        if self.lease.keep():
            return True
        if self.tally.halt_reason is None:
            self.tally.halt_reason = "another controller took the tuning job over"
            self._stop_all(self.tally.halt_reason)
        return False

    def _job_id(self, number: int) -> str:
        return f"{self.id}-{number:03d}"

    def _has_checkpoint(self, number: int) -> bool:
        return self.runner.has_checkpoint(self._job_id(number))

    def _start(self, suggestion: Suggestion) -> None:
        job_id, number = self._job_id(suggestion.number), suggestion.number
        parent = suggestion.parent
        try:
            training = self.spec.trial_spec(
                suggestion.config,
                None if parent is None else StartFrom(job=self._job_id(parent)),
            )
            full = self.runner.prepare(
                training, job_id=job_id, tuning_job_id=self.id, trial_number=number
            )
        except InvalidInputError as exc:  # recorded as a failed trial; the tuning goes on
            self._record_unstartable(job_id, suggestion, exc)
            return
        self._start_prepared(number, job_id, full)

    @property
    def _promoted_capacity(self) -> CapacityPlan | None:
        """Where a promoted trial goes on: on-demand with Hyperband's placement "rungs"."""
        hyperband = self.spec.hyperband
        if hyperband is not None and hyperband.placement is RungPlacement.RUNGS:
            return CapacityPlan.ON_DEMAND
        return None

    def _resume(self, number: int, job_id: str, capacity: CapacityPlan | None = None) -> None:
        """A paused trial (promoted, or preempted) goes on from its checkpoint: the same job,
        a new attempt (on `capacity` if given)."""
        record = self.store.get_training_job(job_id)
        if record.status is not JobStatus.PAUSED:  # ended meanwhile (`jobs stop`)
            self.tally.outcomes[record.status] += 1
            with self.lock:
                self.scheduler.on_end(number)
            return
        try:
            full = self.runner.prepare_resume(job_id, number, capacity)
        except InvalidInputError as exc:  # its data moved, say: it ends here, Failed
            self.store.abandon_training_job(
                job_id,
                JobStatus.FAILED,
                f"promoted, but could not resume: {exc}",
                self.tuner.clock.time(),
            )
            self.tally.outcomes[JobStatus.FAILED] += 1
            with self.lock:
                self.scheduler.on_end(number)
            self._count_failure(f"could not resume: {exc}")
            return
        self._start_prepared(number, job_id, full)

    def _end_paused(self) -> None:
        """The trials still paused when the tuning job ends will not go on: Stopped."""
        waiting = self.paused | self.preempted
        if not waiting:
            return
        self.store.end_paused_trials(self.id, "; not promoted before the tuning job ended")
        self.tally.outcomes[JobStatus.STOPPED] += len(waiting)
        with self.lock:
            for number in waiting:
                self.scheduler.on_end(number)
        self.paused.clear()
        self.preempted.clear()

    def _start_prepared(self, number: int, job_id: str, full: int | None) -> None:
        stopper = Stopper()
        trial = _Trial(number, job_id, stopper, full, started=self.tuner.clock.monotonic())
        if self.goals.is_multi_objective:  # its costs so far count at each rung
            record = self.store.get_training_job(job_id)
            trial.earlier_seconds = record.wall_seconds or 0.0
            trial.billable = (
                fixed_size(record.instance_count + self.extra_tasks)
                if record.size_range is None  # an elastic trial's, at the sizes it ran at
                else resized(lambda: self.store.attempts.of(job_id), self.tuner.clock.time)
            )
        self.running[number] = trial
        self.runner.start(
            number, stopper, lambda report: self._judge(number, stopper, report, full)
        )

    def _judge(self, number: int, stopper: Stopper, report: Report, full: int | None) -> None:
        """Runs in the trial's thread for every report: the scheduler decides."""
        value = report.metrics.get(self.spec.objective_metric)
        if value is None or stopper.is_set():  # what it reports while it stops changes nothing
            return
        others: tuple[float, ...] = ()
        trial = self.running.get(number)
        if self.goals.is_multi_objective and trial is not None:
            trial.latest.update(report.metrics)
            elapsed = trial.earlier_seconds + self.tuner.clock.monotonic() - trial.started
            others = self.goals.standing(trial.latest, elapsed, trial.billable(elapsed))
        with self.lock:
            self.searcher.on_report(number, report.step, value)
            verdict = self.scheduler.on_report(number, report.step, value, others)
        if verdict.decision is Decision.STOP:
            stopper.request(JobStatus.STOPPED, verdict.reason or "stopped early", early=True)
        elif verdict.decision is Decision.PAUSE:
            # A pause is worth its checkpoint alone: the program gets longer than a stop's
            # grace to save one (Ray actors on a busy machine took more than 5 s, and a trial
            # killed unsaved was promoted from scratch). A program that checks ends at once.
            stopper.request(
                JobStatus.PAUSED, verdict.reason or "paused", grace_seconds=PAUSE_GRACE_SECONDS
            )
        elif verdict.decision is Decision.FINISH and (full is None or report.step < full):
            # A trial that ends at this step anyway finishes by itself, model and all.
            stopper.request(JobStatus.COMPLETED, verdict.reason or "finished")

    def _wait_for_a_trial(self, remaining: float | None) -> None:
        timeout = self.tuner.poll_seconds
        if remaining is not None:
            timeout = max(0.0, min(timeout, remaining))
        for number in self.runner.wait(timeout):
            self._finish_trial(number)

    def _finish_trial(self, number: int) -> None:
        trial = self.running.pop(number, None)
        if trial is None:
            return
        record = self.store.get_training_job(trial.job_id)
        paused = record.status is JobStatus.PAUSED
        if paused and not trial.stopper.is_set():  # its machine's notice, not the scheduler's
            self.preempted[number] = trial.job_id  # it goes on: nothing to learn from yet
            return
        if paused:
            self.paused[number] = trial.job_id
        else:
            self.tally.outcomes[record.status] += 1
        if record.status is JobStatus.FAILED:
            self._count_failure(record.failure_reason)
        value, resource = self._result(
            trial.job_id, trial.full_resource, number, started=record.start_time
        )
        result = self._trial_result(number, record, value, resource)
        with self.lock:
            # A pause is a result too: the searcher learns from it now, and again if the
            # trial is promoted and ends later.
            self.searcher.observe(result)
            if not paused:
                self.scheduler.on_end(number)
        feasible = self._feasible(record)
        if result.value is not None:
            self._consider(trial.job_id, result.value, feasible)
        self.tally.spent(trial.job_id, record.billable_seconds or 0.0, result.value, feasible)

    def _count_failure(self, reason: str | None) -> None:
        if self.tally.failed(reason):
            self._stop_all("the tuning job failed: too many of its trials failed")

    def _consider(self, job_id: str, value: float, feasible: bool = True) -> None:
        if self.tally.consider(value, feasible):
            self.store.set_tuning_best(self.id, job_id, value)

    def _stop_all(self, reason: str) -> None:
        for trial in self.running.values():
            trial.stopper.request(JobStatus.STOPPED, reason)

    def _record_unstartable(
        self, job_id: str, suggestion: Suggestion, error: InvalidInputError
    ) -> None:
        """A trial whose job could not even start is still a record (and counts to max_jobs)."""
        now = self.tuner.clock.time()
        training = self.spec.training
        config = dict(suggestion.config)
        size = config.pop(CLUSTER_SIZE, None)
        self.store.create_training_job(
            NewTrainingJob(
                id=job_id,
                name=training.name,
                algorithm=training.algorithm,
                spec=training.model_dump(mode="json"),
                hyperparameters={**training.hyperparameters, **config},
                instance_count=size if isinstance(size, int) else training.instance_count,
                created_at=now,
                log_dir="",
                tuning_job_id=self.id,
                trial_number=suggestion.number,
            )
        )
        self.store.finish_training_job(
            job_id,
            JobOutcome(
                JobStatus.FAILED, now, now, 0.0, 0.0, {}, failure_reason=f"could not start: {error}"
            ),
        )
        with self.lock:
            self.searcher.observe(TrialResult(suggestion.number, None))
        self.tally.outcomes[JobStatus.FAILED] += 1
        self._count_failure(f"could not start: {error}")
