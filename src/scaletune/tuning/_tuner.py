"""The Tuner loop: it only orchestrates. Searchers propose, schedulers decide, jobs train.

A tuning job's run is a lifecycle shell (`_Run`) over its trial table (`_trial_table`), which
a launcher fills (`_launcher`); the rules it tallies by (`_tally`) and what it learns again
from the store (`_restore`) live apart."""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Mapping

from pydantic import ValidationError

from scaletune.analysis._values import tuned_value
from scaletune.clock import Clock, SystemClock
from scaletune.errors import InvalidInputError, ScaletuneError
from scaletune.spec import (
    TuningJobSpec,
    describe_validation_error,
)
from scaletune.store import (
    JobStatus,
    NewTuningJob,
    Store,
    TuningJobRecord,
)
from scaletune.training import (
    TrainingController,
    process_alive,
    remove_scratch,
    staging_of,
)
from scaletune.training._ids import new_job_id
from scaletune.tuning._launcher import TrialLauncher
from scaletune.tuning._lease import LEASE_SECONDS, TuningLease
from scaletune.tuning._restore import past_reports, warm_start
from scaletune.tuning._runners import JobTrialRunner, TrialRunner
from scaletune.tuning._strategy import goals_of, make_search
from scaletune.tuning._tally import Tally, TuningProgress
from scaletune.tuning._tracked import end_tracking, start_tracking
from scaletune.tuning._trial_table import TrialTable


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
    """One tuning job while it runs: a lifecycle shell (its lease, deadline, stop requests,
    and its ending) over its trial table, which a launcher fills up to the limits."""

    def __init__(
        self,
        tuner: TuningController,
        tuning_id: str,
        spec: TuningJobSpec,
        lease: TuningLease | None = None,
    ) -> None:
        self.tuner, self.store, self.spec, self.id = tuner, tuner.store, spec, tuning_id
        self.lease = lease or TuningLease(tuner.store, tuning_id, tuner.lease_clock)
        self.runner = tuner.runner
        self.search = make_search(spec, has_checkpoint=self._has_checkpoint)
        self.goals = goals_of(spec)
        self.tally = Tally.of_spec(spec)
        self.trials = TrialTable(
            tuning_id,
            spec,
            tuner.store,
            tuner.runner,
            tuner.clock,
            self.search,
            self.goals,
            self.tally,
        )
        self.launcher = TrialLauncher(
            tuning_id, spec, tuner.store, tuner.runner, self.trials, tuner.clock.time
        )
        warm_start(self.store, spec, self.search.searcher)  # the parents' trials as priors
        # Interrupted trials reopened by a resume: started before any new one.
        self._resumable: dict[int, tuple[str, int | None]] = {}

    def _has_checkpoint(self, number: int) -> bool:
        return self.runner.has_checkpoint(self.trials.job_id(number))

    def restore(self, continuing: Mapping[int, int | None] | None = None) -> None:
        """Bring searcher, scheduler and best-so-far to where the trials in the store left
        them. `continuing` trials (number -> full resource) were reopened to go on from
        their checkpoints: they count as running, and `run` starts them first."""
        continuing = continuing or {}
        table, searcher, scheduler = self.trials, self.search.searcher, self.search.scheduler
        trials = self.store.training_jobs_of(self.id)
        for trial in trials:
            assert trial.trial_number is not None  # trials of a tuning job have numbers
            value, resource = table.result(trial.id, started=trial.start_time)
            tuned = {name: tuned_value(trial, name) for name in self.spec.ranges}
            self.launcher.proposed += 1
            if trial.trial_number in continuing:
                searcher.restore(trial.trial_number, tuned, None)
                self._resumable[trial.trial_number] = (trial.id, continuing[trial.trial_number])
                continue
            if trial.status is JobStatus.PAUSED:
                table.paused[trial.trial_number] = trial.id
            else:
                self.tally.outcomes[trial.status] += 1
            ended = table.trial_result(trial.trial_number, trial, value, resource)
            searcher.restore(trial.trial_number, tuned, ended)
        for report in past_reports(self.store, self.spec, self.goals, table.extra_tasks, trials):
            searcher.on_report(report.number, report.step, report.value)
            scheduler.on_report(report.number, report.step, report.value, report.others)
        for number in continuing:
            scheduler.on_resumed(number)  # caught paused or just promoted: it goes on
        for trial in sorted(trials, key=lambda t: t.end_time or 0.0):
            if trial.trial_number in continuing:
                continue  # not ended: it goes on
            if trial.status is not JobStatus.PAUSED:  # a paused one waits as it was
                scheduler.on_end(trial.trial_number or 0)
            value = None if trial.status is JobStatus.FAILED else trial.objective
            feasible = table.feasible(trial)
            if value is not None:
                table.consider(trial.id, value, feasible)
            self.tally.spent(trial.id, trial.billable_seconds or 0.0, value, feasible)
        self.search.restored()

    def run(self) -> TuningJobRecord:
        self.lease.take()  # before anything: one controller runs it (a resume's, taken)
        self.runner.ensure_capacity(self.spec.max_parallel_jobs * self.spec.max_task_count)
        self.runner.judge_at(self.search.scheduler.judged_steps)
        clock = self.tuner.clock
        # A resumed job keeps its first start: its wall time spans the interruption.
        start = self.store.get_tuning_job(self.id).start_time or clock.time()
        started = clock.monotonic() - (clock.time() - start)
        self.store.mark_tuning_in_progress(self.id, start, os.getpid(), socket.gethostname())
        tracking = self.tuner.tracking
        tracker = None if tracking is None else start_tracking(tracking, self.spec, self.id, start)
        status, interrupted = JobStatus.COMPLETED, False
        try:
            status = self._loop(started)
        except KeyboardInterrupt:
            status, interrupted = JobStatus.STOPPED, True
            self.tally.halt_reason = "interrupted (Ctrl-C)"
            self.trials.stop_all("the tuning job was interrupted")
        finally:
            self._end(status, started)
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

    def _loop(self, started: float) -> JobStatus:
        """Trials started and ended until none is left to start or run; how the job ends."""
        clock, table, status = self.tuner.clock, self.trials, JobStatus.COMPLETED
        limit = self.spec.max_runtime_seconds
        deadline = None if limit is None else started + limit
        next_stop_check = started
        for number, (job_id, full) in sorted(self._resumable.items()):
            table.start(number, job_id, full)
        self._resumable.clear()
        while self.launcher.launch_more(self._lease_held) or table.running:
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
                table.stop_all("the tuning job was stopped")
            elif deadline is not None and clock.monotonic() >= deadline:
                self.tally.halt_reason = f"max_runtime_seconds={limit:g} reached"
                status = JobStatus.STOPPED
                table.stop_all(f"the tuning job reached its {self.tally.halt_reason}")
        return status

    def _end(self, status: JobStatus, started: float) -> None:
        """Every trial waited for and counted, then the job's ending (while its lease holds)."""
        clock, tally = self.tuner.clock, self.tally
        for number in self.runner.wait_all():
            self.trials.finish(number)
        if not self.lease.lost:  # else its paused trials are the new controller's
            self.trials.end_paused()
        self._progress()  # as it ended: every trial counted
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
            completion_reason=self._completion_reason() if status is JobStatus.COMPLETED else None,
        )

    def _completion_reason(self) -> str | None:
        """Why a completed job ended when it did: a rule that halted it, else its max_jobs."""
        if self.tally.halt_reason is not None:
            return self.tally.halt_reason
        if self.launcher.proposed >= self.spec.max_jobs:
            return f"max_jobs={self.spec.max_jobs} reached"
        return None

    def _progress(self) -> None:
        if self.tuner.on_progress is not None:
            self.tuner.on_progress(
                self.tally.progress(
                    running=len(self.trials.running),
                    paused=len(self.trials.paused),
                    max_jobs=self.spec.max_jobs,
                )
            )

    def _lease_held(self) -> bool:
        """Whether this controller still runs the job (its lease renewed when due); once
        another has taken over, no trial starts here and the running ones are stopped."""
        if self.lease.keep():
            return True
        if self.tally.halt_reason is None:
            self.tally.halt_reason = "another controller took the tuning job over"
            self.trials.stop_all(self.tally.halt_reason)
        return False

    def _wait_for_a_trial(self, remaining: float | None) -> None:
        timeout = self.tuner.poll_seconds
        if remaining is not None:
            timeout = max(0.0, min(timeout, remaining))
        for number in self.runner.wait(timeout):
            self.trials.finish(number)
