"""Trials as learning curves on a simulated clock: the tuning loop, searchers and schedulers are
the real ones; only the training is replaced. `wait` jumps the clock to the next report
instead of sleeping. A trial's reports reach the tuner when their simulated time comes and the
store when the trial ends, with its outcome in one transaction: a simulated job of 10,000
trials is a few writes per trial, not one per report."""

from __future__ import annotations

import heapq
import os
import socket
from collections.abc import Mapping
from dataclasses import dataclass, field

from scaletune._verdict import VERDICT_WAIT_SECONDS
from scaletune.errors import InvalidInputError
from scaletune.simulation._clock import SimulatedClock
from scaletune.simulation._curves import Curve, CurveSource
from scaletune.spec import CapacityPlan, TrainingJobSpec
from scaletune.store import JobOutcome, JobStatus, MetricPoint, Store
from scaletune.training import Stopper, new_job_record
from scaletune.tuning._runners import JudgedSteps, OnReport
from scaletune.worker import Report


@dataclass
class _Trial:
    job_id: str
    curve: Curve
    instance_count: int
    stopper: Stopper = field(default_factory=Stopper)
    on_report: OnReport | None = None
    started: float = 0.0  # simulated monotonic time its curve's time counts from
    start_time: float = 0.0
    run_began: float = 0.0  # simulated monotonic time this run (since a start or resume) began
    earlier_wall: float = 0.0  # the time it ran before it paused
    runs: int = 0  # runs ended by a pause; a trial that paused has attempts, as a real one
    runs_from: int = 0  # curve points reported before this run began
    reported: int = 0  # curve points reported so far
    final_metrics: dict[str, float] = field(default_factory=dict)
    unwritten: list[MetricPoint] = field(default_factory=list)  # stored when it ends
    inherited: bool = False  # it starts from another trial's checkpoint (PBT)


class SimulatedTrialRunner:
    """A `TrialRunner` whose trials follow the curves a `CurveSource` gives.

    `capacity_workers` is the simulated cluster's size (None: unbounded); `horizon_seconds`,
    where set, is a moment the clock never jumps past (the tuning job's deadline).
    """

    def __init__(
        self,
        store: Store,
        source: CurveSource,
        clock: SimulatedClock,
        *,
        capacity_workers: int | None = None,
        horizon_seconds: float | None = None,
    ) -> None:
        self.store = store
        self.source = source
        self.clock: SimulatedClock = clock
        self.capacity_workers = capacity_workers
        self.horizon_seconds = horizon_seconds
        self._trials: dict[int, _Trial] = {}
        self._paused: dict[int, _Trial] = {}  # where each paused trial's curve stopped
        self._events: list[tuple[float, int, int]] = []  # (moment, order, trial number)
        self._ending: set[int] = set()  # trials whose next event is their end, not a report
        self._asked_to_stop: set[int] = set()  # running trials whose stopper is set
        self._held: dict[int, float] = {}  # trials held at a judged step, since when
        self._order = 0  # ties go in the order they were scheduled: runs are deterministic

    def ensure_capacity(self, workers: int) -> None:
        if self.capacity_workers is not None and workers > self.capacity_workers:
            raise InvalidInputError(
                f"the tuning job needs {workers} workers at once; the simulated cluster "
                f"has {self.capacity_workers}"
            )

    def judge_at(self, steps: JudgedSteps) -> None:
        pass  # a simulated trial's stop lands at the report that asks it; a held one waits

    def prepare(
        self, spec: TrainingJobSpec, *, job_id: str, tuning_job_id: str, trial_number: int
    ) -> int | None:
        curve = self.source.curve(spec.hyperparameters, spec.instance_count)
        start_from = spec.checkpoint.start_from
        inherited = [] if start_from is None else self._inherited(start_from.job)
        reached = max((point.step for point in inherited), default=0)
        if start_from is not None:  # recorded with the step it took: its donor's newest
            taken = start_from.model_copy(update={"step": reached})
            checkpoint = spec.checkpoint.model_copy(update={"start_from": taken})
            spec = spec.model_copy(update={"checkpoint": checkpoint})
        self.store.create_training_job(
            new_job_record(
                spec,
                job_id,
                created_at=self.clock.time(),
                log_dir="",  # no worker writes a log
                tuning_job_id=tuning_job_id,
                trial_number=trial_number,
            ),
            inherited,
        )
        trial = _Trial(job_id, curve, spec.instance_count)
        if start_from is not None:
            # A surrogate has no weights to pass on: the trial follows its own curve from
            # the step it inherits, having paid for none of the steps before it.
            trial.reported = sum(1 for point in curve.points if point.step <= reached)
            trial.inherited = True
            trial.final_metrics = {point.name: point.value for point in inherited}
        self._trials[trial_number] = trial
        return curve.full_resource

    def _inherited(self, job_id: str) -> list[MetricPoint]:
        """The reports of a trial up to its newest checkpoint: a simulated trial keeps one at
        every report (a paused one resumes where its curve stopped)."""
        if not self.has_checkpoint(job_id):
            raise InvalidInputError(
                f"checkpoint.start_from.job: simulated trial {job_id!r} has no checkpoint"
            )
        running = [trial for trial in self._all() if trial.job_id == job_id]
        stored = self.store.metrics(job_id)
        return sorted(
            stored + (running[0].unwritten if running else []), key=lambda p: (p.step, p.name)
        )

    def _all(self) -> list[_Trial]:
        return [*self._trials.values(), *self._paused.values()]

    def has_checkpoint(self, job_id: str) -> bool:
        """A trial that reported: it is running, paused, or ended with its reports stored."""
        for trial in self._all():
            if trial.job_id == job_id:
                return trial.reported > 0
        return bool(self.store.metrics(job_id))

    def prepare_resume(
        self, job_id: str, trial_number: int, capacity: CapacityPlan | None = None
    ) -> int | None:
        """A paused trial goes on where its curve stopped (a simulated trial has no capacity).
        Any other simulated trial keeps no checkpoint: an interrupted one stays Failed."""
        trial = self._paused.pop(trial_number, None)
        if trial is None:
            raise InvalidInputError(f"simulated trial {job_id!r} has no checkpoint to resume from")
        self.store.reopen_training_job(job_id)
        self._trials[trial_number] = trial
        return trial.curve.full_resource

    def start(self, trial_number: int, stopper: Stopper, on_report: OnReport) -> None:
        trial = self._trials[trial_number]
        trial.stopper, trial.on_report = stopper, on_report
        self._asked_to_stop.discard(trial_number)
        stopper.when_requested(lambda: self._stop_requested(trial_number, stopper))
        now = self.clock.monotonic()
        trial.run_began = now
        if trial.reported == 0:
            trial.started, trial.start_time = now, self.clock.time()
        else:  # resumed, or inherited: start-up, then the curve from that step
            trial.runs_from = trial.reported
            reached = trial.curve.points[trial.reported - 1].seconds
            trial.started = now + trial.curve.start_seconds - reached
            if trial.inherited and trial.runs == 0:
                trial.start_time = self.clock.time()
        self.store.mark_in_progress(
            trial.job_id, trial.start_time, os.getpid(), socket.gethostname()
        )
        self._schedule(trial_number, trial)

    def _stop_requested(self, number: int, stopper: Stopper) -> None:
        trial = self._trials.get(number)
        if trial is not None and trial.stopper is stopper:  # not a run that has ended
            self._asked_to_stop.add(number)

    def _schedule(self, number: int, trial: _Trial) -> None:
        points = trial.curve.points
        if trial.reported < len(points):
            offset = points[trial.reported].seconds
        else:
            offset = trial.curve.ends_at
            self._ending.add(number)
        heapq.heappush(self._events, (trial.started + offset, self._order, number))
        self._order += 1

    def wait(self, timeout_seconds: float) -> list[int]:
        """End the trials that were asked to stop; else move to the next report and deliver it.
        With nothing scheduled (every running trial held for a copy that waits for its donor's
        checkpoint), the clock moves on by `timeout_seconds`, as a real wait would."""
        if self._asked_to_stop:  # in the order they started, as every run of a seed
            stopped = [n for n in self._trials if n in self._asked_to_stop]
            for number in stopped:
                self._finish(number, self._trials[number].stopper)
            return stopped
        if not self._events:  # every trial held, or none running: the wait passes idle
            idle_until = self.clock.monotonic() + timeout_seconds
            if self.horizon_seconds is not None:
                idle_until = min(idle_until, self.horizon_seconds)
            self.clock.advance_to(max(self.clock.monotonic(), idle_until))
            return []
        moment, _, number = self._events[0]
        if self.horizon_seconds is not None and moment > self.horizon_seconds:
            self.clock.advance_to(max(self.clock.monotonic(), self.horizon_seconds))
            return []
        heapq.heappop(self._events)
        self.clock.advance_to(moment)
        trial = self._trials[number]
        if number not in self._ending:
            step = self._report(trial)
            if not trial.stopper.verdicts.is_in(step):  # held for the others: it waits there,
                # as a real trial's program does, at most VERDICT_WAIT_SECONDS
                self._held[number] = self.clock.monotonic()
                trial.started += VERDICT_WAIT_SECONDS
                self._schedule(number, trial)
                trial.stopper.verdicts.when_released(step, lambda: self._released(number, trial))
                return []
            self._held.pop(number, None)  # it went on past a hold that was never released
            last = trial.reported == len(trial.curve.points)
            if not trial.stopper.is_set() and (
                not last or trial.curve.ends_at > trial.curve.points[-1].seconds
            ):
                self._schedule(number, trial)  # its next report, or its end if that is later
                return []
        self._finish(number, trial.stopper if trial.stopper.is_set() else None)
        return [number]

    def _released(self, number: int, trial: _Trial) -> None:
        """A held trial's verdict is in: its curve goes on from now, later by the wait (a stop
        decided there ends it at the next `wait`)."""
        held = self._held.pop(number, None)
        if held is None or self._trials.get(number) is not trial:
            return  # it went on without the verdict, or ended
        self._events = [event for event in self._events if event[2] != number]
        heapq.heapify(self._events)
        trial.started += self.clock.monotonic() - held - VERDICT_WAIT_SECONDS
        if not trial.stopper.is_set():
            self._schedule(number, trial)

    def _report(self, trial: _Trial) -> int:
        point = trial.curve.points[trial.reported]
        trial.reported += 1
        now = self.clock.time()
        trial.unwritten.extend(
            MetricPoint(name, point.step, value, now) for name, value in point.metrics.items()
        )
        trial.final_metrics.update(point.metrics)
        assert trial.on_report is not None  # set by start()
        trial.on_report(Report(rank=0, step=point.step, metrics=dict(point.metrics), time=now))
        return point.step

    def wait_all(self) -> list[int]:
        """Every running trial's stopper is set by now: they end at this moment."""
        numbers = [n for n, t in self._trials.items() if t.on_report is not None]
        for number in numbers:
            self._finish(number, self._trials[number].stopper)
        return numbers

    def _finish(self, number: int, stopper: Stopper | None) -> None:
        trial = self._trials.pop(number)
        self._ending.discard(number)
        self._asked_to_stop.discard(number)
        self._held.pop(number, None)
        self._events = [event for event in self._events if event[2] != number]
        heapq.heapify(self._events)
        reason: str | None
        if stopper is not None and stopper.is_set():
            status, reason = stopper.status, stopper.reason
        elif stopper is not None:  # ended with its tuning job (Ctrl-C) before being told
            status, reason = JobStatus.STOPPED, "its tuning job ended"
        else:
            status, reason = trial.curve.end_status, trial.curve.end_reason
        wall = trial.earlier_wall + self.clock.monotonic() - trial.run_began  # ran, not paused
        self.store.finish_training_job(
            trial.job_id,
            JobOutcome(
                status=status,
                start_time=trial.start_time,
                end_time=self.clock.time(),
                wall_seconds=wall,
                billable_seconds=trial.instance_count * wall,
                final_metrics=trial.final_metrics,
                failure_reason=reason,
            ),
            trial.unwritten,
        )
        if status is JobStatus.PAUSED or trial.runs or trial.inherited:
            self._record_attempt(trial, status, reason)
        if status is JobStatus.PAUSED:
            trial.earlier_wall, trial.unwritten = wall, []
            trial.stopper, trial.on_report = Stopper(), None
            trial.runs += 1
            self._paused[number] = trial

    def _record_attempt(self, trial: _Trial, status: JobStatus, reason: str | None) -> None:
        """The run that just ended, as an attempt: when it ran and where it resumed from
        (replays leave out the pauses between attempts)."""
        began = self.clock.time() - (self.clock.monotonic() - trial.run_began)
        resumed = trial.curve.points[trial.runs_from - 1].step if trial.runs_from else None
        self.store.attempts.start(trial.job_id, trial.runs + 1, began, resumed_from_step=resumed)
        self.store.attempts.end(
            trial.job_id, trial.runs + 1, status=status, end_time=self.clock.time(), reason=reason
        )

    @property
    def running(self) -> Mapping[int, str]:
        """Trial number to job id, for the trials started and not yet ended."""
        return {n: t.job_id for n, t in self._trials.items() if t.on_report is not None}
