"""One controller runs a tuning job at a time: its lease in the store refuses a second one
(a resume racing another, or run from a machine whose processes cannot be seen), lapses
when its holder stops renewing it, and a controller that lost it starts nothing more and
writes nothing of the job's ending. Trials are simulated; the store, threads and races real."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaletune.clock import Clock
from scaletune.errors import InvalidInputError, ScaletuneError
from scaletune.simulation import SimulatedClock, SimulatedTrialRunner
from scaletune.spec import TuningJobSpec, tuning_spec_from_dict
from scaletune.store import JobStatus, Store
from scaletune.tuning import TuningController
from scaletune.tuning._lease import LEASE_SECONDS, TuningLease
from tests.simulated import RisingCurves

MAX_JOBS = 12


class _Clock:
    """Wall time the test moves by hand (leases are about real time)."""

    def __init__(self, now: float = 10_000.0) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    def monotonic(self) -> float:
        return self.now


def _spec() -> TuningJobSpec:
    return tuning_spec_from_dict(
        {
            "objective_metric": "accuracy",
            "strategy": "Hyperband",
            "hyperband": {"min_resource": 1, "max_resource": 9, "eta": 3, "rank_by": "value"},
            "max_jobs": MAX_JOBS,
            "max_parallel_jobs": 3,
            "seed": 0,
            "ranges": {"x": {"type": "Continuous", "min_value": 0, "max_value": 1}},
            "training": {"algorithm": "script", "script": {"entry_point": "simulated"}},
        }
    )


def _tuner(store: Store, lease_clock: Clock) -> TuningController:
    runner = SimulatedTrialRunner(store, RisingCurves(), SimulatedClock(1_000.0))
    return TuningController(
        runner,
        clock=runner.clock,
        poll_seconds=1.0,
        lease_clock=lease_clock,
    )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 'lease.db'}") as opened:
        yield opened


def _orphan_elsewhere(store: Store, clock: _Clock) -> str:
    """A tuning job whose controller ran on another machine (its process cannot be seen
    from here) and holds its lease as of now."""
    tuning_id = _tuner(store, clock).create(_spec())
    store.mark_tuning_in_progress(tuning_id, clock.now, pid=4321, host="another-machine")
    lease = TuningLease(store, tuning_id, clock, holder="another-machine:4321:run")
    lease.take()
    return tuning_id


def _trials(store: Store, tuning_id: str) -> list[int]:
    return sorted(t.trial_number or 0 for t in store.training_jobs_of(tuning_id))


def test_a_job_run_from_another_machine_is_resumed_only_once_its_lease_lapses(
    store: Store,
) -> None:
    clock = _Clock()
    tuning_id = _orphan_elsewhere(store, clock)
    with pytest.raises(InvalidInputError, match=r"run by another controller \(another-machine"):
        _tuner(store, clock).resume(tuning_id)
    assert store.get_tuning_job(tuning_id).lease_holder == "another-machine:4321:run"

    clock.now += LEASE_SECONDS + 1  # not renewed: its controller is gone
    record = _tuner(store, clock).resume(tuning_id)
    assert record.status is JobStatus.COMPLETED
    assert record.lease_holder is None  # freed as it ended
    assert _trials(store, tuning_id) == list(range(MAX_JOBS))


def test_of_two_resumes_at_once_one_runs_the_job_and_the_other_is_refused(
    store: Store,
) -> None:
    clock = _Clock()
    tuning_id = _orphan_elsewhere(store, clock)
    clock.now += LEASE_SECONDS + 1
    together = threading.Barrier(2)
    outcomes: list[object] = []

    def resume() -> None:
        tuner = _tuner(store, clock)
        together.wait()
        try:
            outcomes.append(tuner.resume(tuning_id).status)
        except InvalidInputError as exc:
            outcomes.append(str(exc))

    threads = [threading.Thread(target=resume) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert JobStatus.COMPLETED in outcomes
    [refusal] = [o for o in outcomes if not isinstance(o, JobStatus)]
    # Refused by the lease, or, if the other already started, by its live process here.
    assert re.search("is run by another controller|is still running", str(refusal))
    assert _trials(store, tuning_id) == list(range(MAX_JOBS))  # none twice, none too many


class _TakenOverAfter:
    """A lease clock under which another controller takes the job over, once the first has
    asked the time `calls` times: the time jumps past the lease, and the other holds it."""

    def __init__(self, store: Store, calls: int) -> None:
        self.store, self.calls, self.now = store, calls, 10_000.0
        self.tuning_id = ""

    def time(self) -> float:
        self.calls -= 1
        if self.calls == 0:
            self.now += LEASE_SECONDS + 1
            assert self.store.take_tuning_lease(self.tuning_id, "thief", self.now, 1e12) is None
        return self.now

    def monotonic(self) -> float:
        return self.now


def test_a_controller_that_lost_its_lease_starts_nothing_more_and_writes_no_ending(
    store: Store,
) -> None:
    clock = _TakenOverAfter(store, calls=4)
    tuner = _tuner(store, clock)
    spec = _spec()
    clock.tuning_id = tuning_id = tuner.create(spec)
    with pytest.raises(ScaletuneError, match="taken over by another controller"):
        tuner.run(tuning_id, spec)
    record = store.get_tuning_job(tuning_id)
    assert record.status is JobStatus.IN_PROGRESS  # its ending is the new holder's to write
    assert record.lease_holder == "thief"
    started = _trials(store, tuning_id)
    assert 0 < len(started) < MAX_JOBS  # it stopped starting trials once it knew
    assert all(t.status.has_run for t in store.training_jobs_of(tuning_id))  # and ended its own
