"""The tuning job's tally: best so far in its direction, and the rules that halt or fail it."""

from __future__ import annotations

from scaletune.spec import tuning_spec_from_dict
from scaletune.store import JobStatus
from scaletune.tuning._tally import Tally
from tests.tuning.test_tuner import _spec_dict


def test_the_best_follows_the_objectives_direction_and_ignores_infeasible_results() -> None:
    lowest = Tally(maximize=False)
    assert lowest.consider(0.5) and lowest.best == 0.5
    assert not lowest.consider(0.7) and lowest.since_improvement == 1
    assert not lowest.consider(0.5)  # as good is not better
    assert not lowest.consider(0.1, feasible=False)  # breaks a constraint: no better than none
    assert lowest.best == 0.5 and lowest.since_improvement == 3
    assert lowest.consider(0.2) and lowest.since_improvement == 0
    highest = Tally(maximize=True)
    assert highest.consider(0.5) and not highest.consider(0.2) and highest.consider(0.9)
    assert highest.best == 0.9


def test_a_feasible_result_at_the_target_halts_and_the_first_reason_is_kept() -> None:
    tally = Tally(maximize=True, target=0.9)
    tally.consider(0.95, feasible=False)
    assert tally.halt_reason is None
    tally.consider(0.9)
    assert tally.halt_reason == "target_objective=0.9 reached"
    tally.halt("stop requested")
    assert tally.halt_reason == "target_objective=0.9 reached"


def test_no_improvement_in_as_many_jobs_as_its_patience_halts() -> None:
    tally = Tally(maximize=False, patience=2)
    tally.consider(0.3)
    tally.consider(0.4)
    assert tally.halt_reason is None
    tally.consider(0.5)
    assert tally.halt_reason == "no improvement in 2 jobs"


def test_the_failure_that_reaches_the_limit_fails_the_job_once() -> None:
    tally = Tally(maximize=False, max_failed=2)
    tally.outcomes[JobStatus.FAILED] += 1
    assert not tally.failed("out of memory")
    tally.outcomes[JobStatus.FAILED] += 1
    assert tally.failed("out of disk")
    assert tally.failure_reason == "max_failed_trials=2 reached (the last: out of disk)"
    assert tally.halt_reason == tally.failure_reason
    tally.outcomes[JobStatus.FAILED] += 1
    assert not tally.failed("again")  # failed already: told once
    assert not Tally(maximize=False).failed("no limit")


def test_a_tally_takes_its_rules_from_the_spec_and_counts_progress() -> None:
    spec = tuning_spec_from_dict(
        _spec_dict(target_objective=0.1, max_jobs_without_improvement=3, max_failed_trials=4)
    )
    tally = Tally.of_spec(spec)
    assert (tally.maximize, tally.target, tally.patience, tally.max_failed) == (False, 0.1, 3, 4)
    tally.outcomes.update([JobStatus.COMPLETED, JobStatus.COMPLETED, JobStatus.STOPPED])
    tally.consider(0.4)
    progress = tally.progress(running=2, paused=1, max_jobs=8)
    assert (progress.completed, progress.stopped, progress.failed) == (2, 1, 0)
    assert (progress.running, progress.paused, progress.max_jobs, progress.best) == (2, 1, 8, 0.4)
