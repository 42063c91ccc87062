"""Promotion-type Hyperband on the simulated backend, through a schedule worked out by hand."""

from __future__ import annotations

from scaletune.analysis import summarize
from scaletune.simulation import simulate_tuning
from scaletune.store import JobStatus, Store
from scaletune.tuning import TuningController, TuningProgress
from tests.simulation.test_runner import SequenceSource, _spec

NOT_PROMOTED = ": paused until it is; not promoted before the tuning job ended"


def test_a_hand_computed_promotion_schedule(store: Store) -> None:
    # As the stopping schedule (tests/simulation/test_runner.py): two workers per trial, 2 s
    # start-up then 1 s a step, two trials at a time, one bracket (rungs 1 and 3). Trials
    # that do not rank at a rung pause instead of stopping:
    #   t=0   trials 0 (0.5) and 1 (0.8) start, pass both rungs, complete at t=11
    #   t=11  trials 2 (0.3) and 3 (0.9) start
    #   t=14  trial 2 at rung 1: 0.3 not the best of 3: paused; trial 4 (0.6) starts
    #   t=17  trial 4 at rung 1: paused; trial 5 (0.4) starts
    #   t=20  trial 5 paused (best 2 of 6: 0.9, 0.8); trial 6 (0.1) starts
    #   t=22  trial 3 completes; trial 7 (0.2) starts
    #   t=23  trial 6 paused; trial 8 (0.05) starts      t=25  trial 7 paused
    #   t=26  trial 8 paused: 9 values at rung 1, so the best 3 (0.9, 0.8, 0.6) rank, and
    #         trial 4's 0.6 is promoted: 2 s start-up again, step 2 at t=29, step 3 at t=30
    #   t=30  trial 4 at rung 3: 0.6 not the best of 4: paused. Nothing runs, nothing ranks:
    #         the tuning job ends, and its paused trials end Stopped.
    source = SequenceSource([0.5, 0.8, 0.3, 0.9, 0.6, 0.4, 0.1, 0.2, 0.05])
    spec = _spec(
        max_jobs=9,
        hyperband={"max_resource": 9, "type": "promotion", "brackets": 1, "rank_by": "value"},
    )
    record = simulate_tuning(spec, source, store, start_time=1000.0)

    def paused(rung: int, value: float, keep: int, of: int) -> str:
        return f"bracket 0 rung {rung}: {value:g} not in the best {keep} of {of}{NOT_PROMOTED}"

    expected = [
        (JobStatus.COMPLETED, 9, 0.0, 11.0, 22.0, None),
        (JobStatus.COMPLETED, 9, 0.0, 11.0, 22.0, None),
        (JobStatus.STOPPED, 1, 11.0, 14.0, 6.0, paused(1, 0.3, 1, 3)),
        (JobStatus.COMPLETED, 9, 11.0, 22.0, 22.0, None),
        # Ran 14-17 and 26-30: billed for those 7 s on 2 workers, not for its pause.
        (JobStatus.STOPPED, 3, 14.0, 30.0, 14.0, paused(3, 0.6, 1, 4)),
        (JobStatus.STOPPED, 1, 17.0, 20.0, 6.0, paused(1, 0.4, 2, 6)),
        (JobStatus.STOPPED, 1, 20.0, 23.0, 6.0, paused(1, 0.1, 2, 7)),
        (JobStatus.STOPPED, 1, 22.0, 25.0, 6.0, paused(1, 0.2, 2, 8)),
        (JobStatus.STOPPED, 1, 23.0, 26.0, 6.0, paused(1, 0.05, 3, 9)),
    ]
    got = [
        (
            t.status,
            t.resource,
            (t.start_time or 0) - 1000.0,
            (t.end_time or 0) - 1000.0,
            t.billable_seconds,
            t.failure_reason,
        )
        for t in store.trials.rows(record.id)
    ]
    assert got == expected
    assert record.status is JobStatus.COMPLETED
    assert record.wall_seconds == 30.0
    promoted = store.trials.rows(record.id)[4].id
    reports = [(p.step, p.time - 1000.0) for p in store.metrics(promoted, "accuracy")]
    assert reports == [(1, 17.0), (2, 29.0), (3, 30.0)]  # each step once, resumed where it was
    summary = summarize(store, record.id)
    assert summary.job_counts["Paused"] == 0
    assert summary.job_counts["Stopped"] == 6


def test_paused_trials_count_in_progress_while_they_wait(store: Store) -> None:
    source = SequenceSource([0.5, 0.8, 0.3, 0.9, 0.6, 0.4, 0.1, 0.2, 0.05])
    spec = _spec(
        max_jobs=9,
        hyperband={"max_resource": 9, "type": "promotion", "brackets": 1, "rank_by": "value"},
    )
    seen: list[TuningProgress] = []
    from scaletune.simulation import SimulatedClock, SimulatedTrialRunner

    runner = SimulatedTrialRunner(store, source, SimulatedClock(1000.0))
    tuner = TuningController(runner, on_progress=seen.append)
    tuner.run(tuner.create(spec), spec)
    waiting = seen[-2]  # t=26: trial 4 promoted, runs again; 2, 5, 6, 7 and 8 wait
    assert (waiting.running, waiting.paused, waiting.completed, waiting.stopped) == (1, 5, 3, 0)
    ended = seen[-1]  # as the job ended: the waiting ones Stopped, every trial counted
    assert (ended.running, ended.paused, ended.completed, ended.stopped) == (0, 0, 3, 6)
    assert max(progress.paused for progress in seen) == 5
