"""Synchronous PBT, worked by hand: a generation is ranked once the whole population is at
its step, every member by its value there; a member that got there first is held until then.
And in simulation: every exploit lands at a generation, and members wait for each other."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaletune.simulation import replay_tuning, simulate_tuning
from scaletune.spec import ContinuousRange, ObjectiveType, PBTSpec, Range, tuning_spec_from_dict
from scaletune.store import JobStatus, Store
from scaletune.tuning._pbt_synchronous import (
    UNKNOWN_LENGTH_GENERATIONS,
    SynchronousPopulationBasedTraining,
)
from scaletune.tuning._schedulers import Decided, Decision
from tests.simulated import RisingCurves
from tests.tuning.test_pbt import _pbt_job

RANGES: dict[str, Range] = {"x": ContinuousRange(min_value=0.0, max_value=1.0)}


def _population(size: int = 4, max_jobs: int = 100) -> SynchronousPopulationBasedTraining:
    spec = PBTSpec(perturbation_interval=2, synchronous=True, resample_probability=0.0)
    population = SynchronousPopulationBasedTraining(
        RANGES, ObjectiveType.MAXIMIZE, 7, spec, population=size, max_jobs=max_jobs
    )
    for _ in range(size):
        assert population.suggest() is not None
    return population


def _decisions(decided: list[Decided]) -> dict[int, Decision]:
    return {verdict.trial: verdict.verdict.decision for verdict in decided}


def test_a_generation_is_ranked_once_every_member_is_at_its_step() -> None:
    population = _population()
    scheduler = population.scheduler
    for member in range(4):  # step 1: no generation
        assert scheduler.on_report(member, 1, 0.5).decision is Decision.CONTINUE
    # Member 0 is the worst at step 2, but it is held, not judged, while others are not there.
    for member, value in [(0, 0.1), (1, 0.9), (2, 0.5)]:
        assert scheduler.on_report(member, 2, value).decision is Decision.HOLD
        assert scheduler.take_decided() == []
    # Member 3 was the best at step 1; at step 2 it is the worst of all, and that counts.
    assert scheduler.on_report(3, 2, 0.05).decision is Decision.HOLD
    decided = scheduler.take_decided()
    assert {d.step for d in decided} == {2} and sorted(d.trial for d in decided) == [0, 1, 2, 3]
    assert _decisions(decided) == {
        0: Decision.CONTINUE,
        1: Decision.CONTINUE,
        2: Decision.CONTINUE,
        3: Decision.STOP,
    }
    stop = next(d.verdict for d in decided if d.trial == 3)
    assert stop.reason is not None and "trial 1's checkpoint" in stop.reason
    child = population.suggest()
    assert child is not None and (child.number, child.parent) == (4, 1)
    assert scheduler.take_decided() == []  # each verdict is taken once


def test_a_member_that_ends_no_longer_holds_the_others() -> None:
    population = _population(size=3)
    scheduler = population.scheduler
    for member, value in [(0, 0.2), (1, 0.8)]:
        assert scheduler.on_report(member, 2, value).decision is Decision.HOLD
    assert scheduler.take_decided() == []
    scheduler.on_end(2)  # failed before step 2
    assert _decisions(scheduler.take_decided()) == {0: Decision.STOP, 1: Decision.CONTINUE}


def test_a_member_that_reports_past_a_generation_is_ranked_by_its_first_value_past_it() -> None:
    population = _population(size=2)
    scheduler = population.scheduler
    assert scheduler.on_report(0, 2, 0.9).decision is Decision.HOLD
    # Member 1 reports every 3 steps: step 3 passes generation 2 (not held there, since its
    # program is not waiting at 3); its value at 3 ranks it.
    assert scheduler.on_report(1, 3, 0.1).decision is Decision.CONTINUE
    decided = scheduler.take_decided()
    assert [(d.trial, d.step, d.verdict.decision) for d in decided] == [
        (0, 2, Decision.CONTINUE),
        (1, 2, Decision.STOP),
    ]


def test_a_copy_takes_part_from_the_generation_after_its_donors_step() -> None:
    population = _population(size=2)
    scheduler = population.scheduler
    scheduler.on_report(0, 2, 0.9)
    scheduler.on_report(1, 2, 0.1)
    assert _decisions(scheduler.take_decided()) == {0: Decision.CONTINUE, 1: Decision.STOP}
    copy = population.suggest()
    assert copy is not None and copy.parent == 0
    # The copy re-reports step 2 from its donor's checkpoint: that generation is decided.
    assert scheduler.on_report(copy.number, 2, 0.9).decision is Decision.CONTINUE
    assert scheduler.on_report(0, 4, 0.95).decision is Decision.HOLD  # waits for the copy
    assert scheduler.take_decided() == []
    assert scheduler.on_report(copy.number, 4, 0.97).decision is Decision.HOLD
    assert _decisions(scheduler.take_decided()) == {
        0: Decision.STOP,
        copy.number: Decision.CONTINUE,
    }


def test_no_exploit_past_the_budget_yet_every_held_member_is_released() -> None:
    population = _population(size=2, max_jobs=2)
    scheduler = population.scheduler
    scheduler.on_report(0, 2, 0.9)
    scheduler.on_report(1, 2, 0.1)
    assert _decisions(scheduler.take_decided()) == {0: Decision.CONTINUE, 1: Decision.CONTINUE}


def test_judged_steps_are_the_generations_before_the_trials_end() -> None:
    scheduler = _population().scheduler
    assert scheduler.judged_steps(9) == frozenset({2, 4, 6, 8})
    assert scheduler.judged_steps(8) == frozenset({2, 4, 6})  # at 8 it finishes by itself
    unknown = scheduler.judged_steps(None)
    assert len(unknown) == UNKNOWN_LENGTH_GENERATIONS and max(unknown) == 200


def test_a_restart_replays_without_holding_and_goes_on_from_the_next_generation() -> None:
    spec = PBTSpec(perturbation_interval=2, synchronous=True)
    population = SynchronousPopulationBasedTraining(
        RANGES, ObjectiveType.MAXIMIZE, 7, spec, population=2, max_jobs=100
    )
    for number in range(2):
        population.restore(number, {"x": 0.5}, running=True)
    for step in range(1, 6):
        assert population.scheduler.on_report(0, step, 0.5).decision is Decision.CONTINUE
    population.scheduler.on_report(1, 3, 0.4)
    population.restored()
    assert population.scheduler.take_decided() == []
    # Both go on from their checkpoints: member 1 passes 4 again without being held there.
    assert population.scheduler.on_report(1, 4, 0.45).decision is Decision.CONTINUE
    assert population.scheduler.on_report(1, 6, 0.6).decision is Decision.HOLD
    assert population.scheduler.on_report(0, 6, 0.7).decision is Decision.HOLD
    assert _decisions(population.scheduler.take_decided()) == {
        0: Decision.CONTINUE,
        1: Decision.STOP,
    }


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 's.db'}") as opened:
        yield opened


def _job() -> dict[str, Any]:
    return _pbt_job(
        pbt={"perturbation_interval": 2, "synchronous": True},
        max_jobs=12,
        ranges={
            "x": {"type": "Continuous", "min_value": 0, "max_value": 1},
            # 1 to 3 workers: members step at different speeds (1 + step / workers seconds)
            "instance_count": {"type": "Integer", "min_value": 1, "max_value": 3},
        },
    )


def test_in_simulation_members_wait_for_each_other_and_exploits_land_at_generations(
    store: Store,
) -> None:
    spec = tuning_spec_from_dict(_job())
    record = simulate_tuning(spec, RisingCurves(), store, start_time=1_000.0)
    assert record.status is JobStatus.COMPLETED
    trials = store.training_jobs_of(record.id)
    exploited = [t for t in trials if "exploited at step" in (t.failure_reason or "")]
    assert exploited, [t.failure_reason for t in trials]
    for trial in exploited:  # each at a generation, and its last report is that step
        step = int((trial.failure_reason or "").split("exploited at step ")[1].split(":")[0])
        assert step % 2 == 0
        assert max(p.step for p in store.metrics(trial.id, "accuracy")) == step
    # The first four started together; at generation 2 each reported step 3 only once the
    # slowest of them had reported step 2 (they waited for it).
    first = sorted(trials, key=lambda t: t.trial_number or 0)[:4]
    slowest_at_2 = max(_time_of(store, t.id, 2) for t in first)
    for trial in first:
        if trial.status is JobStatus.STOPPED and _last_step(store, trial.id) == 2:
            continue  # exploited at 2
        assert _time_of(store, trial.id, 3) >= slowest_at_2
    # The same reports make the same decisions: a replay reproduces every trial's end.
    replayed = replay_tuning(store, record.id, start_time=9_000.0)
    again = {
        t.trial_number: (t.status, t.failure_reason) for t in store.training_jobs_of(replayed.id)
    }
    assert again == {t.trial_number: (t.status, t.failure_reason) for t in trials}


def _time_of(store: Store, job_id: str, step: int) -> float:
    return next(p.time for p in store.metrics(job_id, "accuracy") if p.step == step)


def _last_step(store: Store, job_id: str) -> int:
    return max(p.step for p in store.metrics(job_id, "accuracy"))
