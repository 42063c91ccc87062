"""How a tuning job's trials run. The tuning loop asks a `TrialRunner` to record, start and
wait for trials; `JobTrialRunner` runs each as a real training job in a thread of its own, and
`scaletune.simulation` replays learning curves against a simulated clock instead."""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
from collections.abc import Callable
from typing import Protocol

from scaletune.clock import Clock
from scaletune.spec import CapacityPlan, TrainingJobSpec
from scaletune.store import Store
from scaletune.training import PreparedJob, Stopper, TrainingController
from scaletune.worker import Report

OnReport = Callable[[Report], None]
# A trial's judged steps from its full length in steps (None: not known).
JudgedSteps = Callable[[int | None], frozenset[int]]


class TrialRunner(Protocol):
    @property
    def store(self) -> Store: ...

    @property
    def clock(self) -> Clock: ...

    def ensure_capacity(self, workers: int) -> None:
        """Make room for this many workers at once (or refuse, naming the number)."""
        ...

    def judge_at(self, steps: JudgedSteps) -> None:
        """The steps where the scheduler decides (its rungs), given a trial's full length: a
        trial's program waits at the report of each until judged, so the decision lands
        there whatever the machine's load."""
        ...

    def prepare(
        self, spec: TrainingJobSpec, *, job_id: str, tuning_job_id: str, trial_number: int
    ) -> int | None:
        """Check the trial's inputs and record it (Pending); raises InvalidInputError.
        Returns the steps it runs when nothing stops it, where that is known."""
        ...

    def prepare_resume(
        self, job_id: str, trial_number: int, capacity: CapacityPlan | None = None
    ) -> int | None:
        """Ready an interrupted trial to go on from its latest checkpoint (a new attempt,
        on `capacity` if given); what it reported past that checkpoint is forgotten. Raises
        InvalidInputError where it cannot go on. Returns the steps it runs when nothing stops
        it, where known."""
        ...

    def start(self, trial_number: int, stopper: Stopper, on_report: OnReport) -> None:
        """Start a prepared trial; `on_report` gets each of its reports, in order."""
        ...

    def has_checkpoint(self, job_id: str) -> bool:
        """Whether the trial has a complete checkpoint another could start from (PBT)."""
        ...

    def wait(self, timeout_seconds: float) -> list[int]:
        """The trials that ended (their records are final), waiting up to the timeout."""
        ...

    def wait_all(self) -> list[int]:
        """Wait for every started trial to end (after their stoppers were set); those ended."""
        ...


class JobTrialRunner:
    """Each trial is a training job run by the TrainingController in a thread of its own."""

    def __init__(self, controller: TrainingController) -> None:
        self.controller = controller
        self.store: Store = controller.store
        self.clock: Clock = controller.clock
        self._prepared: dict[int, PreparedJob] = {}
        self._threads: dict[int, threading.Thread] = {}
        self._ended: queue.Queue[int] = queue.Queue()
        self._concurrent_workers: int | None = None  # the parallel trials' workers, all told
        self._judged_steps: JudgedSteps = lambda full: frozenset()

    def ensure_capacity(self, workers: int) -> None:
        self.controller.backend.ensure_capacity(workers)
        # The trials' workers share the machine's cores: each job learns how many train at
        # once, so that its math runs on its share instead of on every core.
        self._concurrent_workers = workers

    def judge_at(self, steps: JudgedSteps) -> None:
        self._judged_steps = steps

    def prepare(
        self, spec: TrainingJobSpec, *, job_id: str, tuning_job_id: str, trial_number: int
    ) -> int | None:
        job = self.controller.prepare(
            spec, job_id=job_id, tuning_job_id=tuning_job_id, trial_number=trial_number
        )
        return self._keep(trial_number, job)

    def prepare_resume(
        self, job_id: str, trial_number: int, capacity: CapacityPlan | None = None
    ) -> int | None:
        return self._keep(trial_number, self.controller.prepare_resume(job_id, capacity=capacity))

    def _keep(self, trial_number: int, job: PreparedJob) -> int | None:
        if self._concurrent_workers is not None:
            job = dataclasses.replace(job, concurrent_workers=self._concurrent_workers)
        full = job.algorithm.full_resource(job.hyperparameters)
        job = dataclasses.replace(job, judged_steps=self._judged_steps(full))
        self._prepared[trial_number] = job
        return full

    def start(self, trial_number: int, stopper: Stopper, on_report: OnReport) -> None:
        job = self._prepared.pop(trial_number)
        thread = threading.Thread(
            target=self._train,
            args=(job, stopper, trial_number, on_report),
            name=f"scaletune-{job.id}",
            daemon=True,
        )
        self._threads[trial_number] = thread
        thread.start()

    def has_checkpoint(self, job_id: str) -> bool:
        return self.controller.has_checkpoint(job_id)

    def _train(self, job: PreparedJob, stopper: Stopper, number: int, on_report: OnReport) -> None:
        try:
            self.controller.run(job, stopper, on_report=on_report)
        finally:
            self._ended.put(number)

    def wait(self, timeout_seconds: float) -> list[int]:
        ended: list[int] = []
        with contextlib.suppress(queue.Empty):
            ended.append(self._ended.get(timeout=timeout_seconds))
            while True:
                ended.append(self._ended.get_nowait())
        for number in ended:
            self._threads.pop(number).join()
        return ended

    def wait_all(self) -> list[int]:
        for thread in self._threads.values():
            thread.join()
        return self.wait(0.0)
