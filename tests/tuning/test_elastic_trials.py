"""A tuning job whose trials are elastic, on a machine with fewer slots than its parallel
trials ask for at most: each trial starts with what is free, none waits for its most, and
every trial is billed at the sizes it ran at."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaletune.analysis import TuningSummary, summarize
from scaletune.api import Session
from scaletune.cluster import Abandon, FixedSlots, LocalBackend
from scaletune.errors import InvalidInputError
from scaletune.spec import CapacityClass, TuningJobSpec, tuning_spec_from_dict
from scaletune.store import AttemptRecord, JobStatus, TrialRow
from scaletune.tuning import TuningController
from tests.conftest import pooled
from tests.tuning.test_tuner import _spec, _spec_dict

SLOTS = 3
ELASTIC = {"min": 1, "max": 2}


class _MostAtOnce(LocalBackend):
    """The local backend, keeping the most workers that held its slots at once (read as
    each group takes its slots: the store's attempt times are no measure of it, as an
    attempt's start is recorded before it waits for room and its end after its workers
    have given their slots back and the model is published)."""

    most_at_once = 0

    def _reserve(self, classes: Counter[CapacityClass], abandon: Abandon | None) -> None:
        super()._reserve(classes, abandon)
        with self._lock:
            self.most_at_once = max(self.most_at_once, self._in_use.total())


@pytest.fixture(scope="module")
def three_slots() -> Iterator[_MostAtOnce]:
    backend = _MostAtOnce(max_idle_workers=SLOTS, slots=FixedSlots(SLOTS))
    with pooled(backend):
        yield backend


def _elastic_training(rounds: int) -> dict[str, object]:
    channel = {"dataset": "breast-cancer"}
    return {
        "algorithm": "xgboost",
        "instance_count": ELASTIC,
        "hyperparameters": {"num_round": rounds, "eval_metric": "logloss"},
        "channels": {"train": channel, "validation": channel},
        "checkpoint": {"every_steps": 10, "every_seconds": None},
    }


def _tune(
    store_path: Path, backend: LocalBackend, spec: TuningJobSpec
) -> tuple[TuningSummary, list[TrialRow], dict[str, list[AttemptRecord]]]:
    with Session(store_path, backend=backend) as session:
        tuner = TuningController(session.controller)
        tuning_id = tuner.create(spec)
        tuner.run(tuning_id, spec)
        trials = session.store.trials.rows(tuning_id)
        attempts = {trial.id: session.store.attempts.of(trial.id) for trial in trials}
        return summarize(session.store, tuning_id), trials, attempts


def test_elastic_trials_share_the_slots_there_are(
    store_path: Path, three_slots: _MostAtOnce
) -> None:
    spec = _spec(
        strategy="Random",
        hyperband=None,
        max_jobs=4,
        max_parallel_jobs=2,
        training=_elastic_training(rounds=60),
    )
    summary, trials, attempts = _tune(store_path, three_slots, spec)

    assert summary.record.status is JobStatus.COMPLETED
    assert [trial.status for trial in trials] == [JobStatus.COMPLETED] * 4
    sizes = [attempt.size for runs in attempts.values() for attempt in runs]
    assert set(sizes) <= {1, 2}, [(t.trial_number, a) for t in trials for a in attempts[t.id]]
    # Two trials of at most 2 on 3 slots: one started on what the other left.
    assert 1 in sizes
    # Never more workers at once than the slots.
    assert 0 < three_slots.most_at_once <= SLOTS
    for trial in trials:  # billed at the sizes it ran at, not at its most
        ran = {attempt.size for attempt in attempts[trial.id]}
        wall, billable = trial.wall_seconds or 0.0, trial.billable_seconds or 0.0
        assert min(ran) * wall * 0.999 <= billable <= max(ran) * wall * 1.001
        if ran == {1}:
            assert billable == pytest.approx(wall)
    assert summary.billable_seconds == pytest.approx(sum(t.billable_seconds or 0 for t in trials))


def test_a_size_range_and_a_tuned_size_together_are_refused() -> None:
    with pytest.raises(InvalidInputError, match=r"^ranges\.instance_count: .*elastic"):
        _spec(
            training=_elastic_training(rounds=10),
            ranges={"instance_count": {"type": "Integer", "min_value": 1, "max_value": 3}},
        )


def test_elastic_trials_weighed_by_cost_as_they_run(
    store_path: Path, three_slots: LocalBackend
) -> None:
    # Several objectives: each rung weighs a running trial's billable seconds so far, read
    # from its attempts (the sizes it ran at), not its most workers times its seconds.
    raw = _spec_dict(
        hyperband={"min_resource": 5, "max_resource": 40, "eta": 2},
        max_jobs=4,
        max_parallel_jobs=2,
        training=_elastic_training(rounds=40),
    )
    del raw["objective_metric"], raw["objective_type"]
    raw["objectives"] = [
        {"metric": "validation:logloss", "type": "Minimize"},
        {"metric": "billable_seconds", "type": "Minimize"},
    ]
    spec = tuning_spec_from_dict(raw)
    summary, trials, _attempts = _tune(store_path, three_slots, spec)
    assert summary.record.status is JobStatus.COMPLETED
    assert all(t.status in (JobStatus.COMPLETED, JobStatus.STOPPED) for t in trials), [
        (t.status, t.failure_reason) for t in trials
    ]
