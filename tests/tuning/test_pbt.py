"""Population-based training's decisions, worked by hand: who is exploited and when, which
member is copied, how settings are perturbed, the budget, and what a restart rebuilds."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from scaletune.analysis import analytics_dataframe
from scaletune.errors import CheckpointNotReadyError
from scaletune.simulation import (
    SimulatedClock,
    SimulatedTrialRunner,
    replay_tuning,
    simulate_tuning,
)
from scaletune.spec import (
    CategoricalRange,
    ContinuousRange,
    IntegerRange,
    ObjectiveType,
    PBTSpec,
    Range,
    TrainingJobSpec,
    tuning_spec_from_dict,
)
from scaletune.store import JobStatus, Store
from scaletune.tuning import TrialResult, TuningController, random_searcher
from scaletune.tuning._pbt import PopulationBasedTraining
from scaletune.tuning._schedulers import Decision
from tests.simulated import RisingCurves

RANGES: dict[str, Range] = {"x": ContinuousRange(min_value=0.0, max_value=1.0)}


def _population(
    ranges: dict[str, Range] = RANGES,
    *,
    size: int = 4,
    max_jobs: int = 100,
    objective: ObjectiveType = ObjectiveType.MAXIMIZE,
    has_checkpoint: Callable[[int], bool] | None = None,
    **settings: object,
) -> PopulationBasedTraining:
    spec = PBTSpec.model_validate({"perturbation_interval": 2, **settings})
    return PopulationBasedTraining(
        ranges,
        objective,
        7,
        spec,
        population=size,
        max_jobs=max_jobs,
        has_checkpoint=has_checkpoint,
    )


def _start(population: PopulationBasedTraining, count: int) -> list[int]:
    numbers = []
    for _ in range(count):
        suggestion = population.suggest()
        assert suggestion is not None and suggestion.parent is None
        numbers.append(suggestion.number)
    return numbers


def test_the_first_members_are_the_random_searchs_first_draws() -> None:
    population = _population()
    random = random_searcher(RANGES, ObjectiveType.MAXIMIZE, 7)
    for _ in range(4):
        member, drawn = population.suggest(), random.suggest()
        assert member is not None and member.config == drawn.config
    assert population.suggest() is None  # the population is whole: nothing until an exploit
    assert not population.may_propose()


def test_the_worst_member_at_its_interval_is_exploited_for_a_copy_of_the_best() -> None:
    population = _population(resample_probability=0.0, perturbation_factors=(2.0, 2.0))
    _start(population, 4)
    scheduler = population.scheduler
    for member, value in enumerate([0.1, 0.2, 0.3, 0.4]):
        assert scheduler.on_report(member, 1, value).decision is Decision.CONTINUE
    # Ranked only once it has gone 2 steps; members 1-3 have not reported at step 2 yet, but
    # their newest values rank them.
    verdict = scheduler.on_report(0, 2, 0.15)
    assert verdict.decision is Decision.STOP
    assert verdict.reason is not None and "trial 3's checkpoint" in verdict.reason
    assert population.may_propose()
    child = population.suggest()
    assert child is not None and (child.number, child.parent) == (4, 3)
    donor_x = population._configs[3]["x"]
    assert child.config["x"] == pytest.approx(min(2 * float(donor_x), 1.0))  # type: ignore[arg-type]
    # The child goes on from the donor's step (1): ranked once it has gone 2 more.
    assert scheduler.on_report(4, 2, 0.01).decision is Decision.CONTINUE
    assert scheduler.on_report(4, 3, 0.01).decision is Decision.STOP


def test_a_member_in_the_middle_or_top_goes_on() -> None:
    population = _population()
    _start(population, 4)
    for member, value in enumerate([0.1, 0.2, 0.3, 0.4]):
        population.scheduler.on_report(member, 1, value)
    assert population.scheduler.on_report(1, 2, 0.2).decision is Decision.CONTINUE
    assert population.scheduler.on_report(3, 2, 0.4).decision is Decision.CONTINUE
    assert population.suggest() is None


def test_lower_is_better_ranks_the_other_way() -> None:
    population = _population(objective=ObjectiveType.MINIMIZE)
    _start(population, 4)
    for member, value in enumerate([0.1, 0.2, 0.3, 0.4]):
        population.scheduler.on_report(member, 1, value)
    assert population.scheduler.on_report(0, 2, 0.1).decision is Decision.CONTINUE
    verdict = population.scheduler.on_report(3, 2, 0.4)
    assert verdict.reason is not None and "trial 0's checkpoint" in verdict.reason


def test_no_donor_without_a_checkpoint_and_no_exploit_past_the_budget() -> None:
    population = _population(has_checkpoint=lambda number: False)
    _start(population, 4)
    for member, value in enumerate([0.1, 0.2, 0.3, 0.4]):
        population.scheduler.on_report(member, 1, value)
    assert population.scheduler.on_report(0, 2, 0.1).decision is Decision.CONTINUE

    spent = _population(max_jobs=4)
    _start(spent, 4)
    for member, value in enumerate([0.1, 0.2, 0.3, 0.4]):
        spent.scheduler.on_report(member, 1, value)
    assert spent.scheduler.on_report(0, 2, 0.1).decision is Decision.CONTINUE


def test_an_ended_member_is_no_longer_ranked() -> None:
    population = _population(size=2)
    _start(population, 2)
    population.scheduler.on_report(0, 1, 0.1)
    population.scheduler.on_report(1, 1, 0.9)
    population.scheduler.on_end(1)
    assert population.scheduler.on_report(0, 2, 0.1).decision is Decision.CONTINUE


def test_explore_keeps_every_kind_of_range_within_bounds() -> None:
    ranges: dict[str, Range] = {
        "lr": ContinuousRange(min_value=1e-4, max_value=1e-1, scaling="Logarithmic"),
        "momentum": ContinuousRange(min_value=0.9, max_value=0.999, scaling="ReverseLogarithmic"),
        "depth": IntegerRange(min_value=1, max_value=6),
        "booster": CategoricalRange(values=["gbtree", "dart", "gblinear"]),
    }
    population = _population(ranges, resample_probability=0.0, perturbation_factors=(1.2, 1.2))
    perturbed = population.explore({"lr": 0.01, "momentum": 0.99, "depth": 5, "booster": "dart"})
    assert perturbed["lr"] == pytest.approx(0.012)
    assert perturbed["momentum"] == pytest.approx(1 - 0.01 * 1.2)  # its distance to 1 grows
    assert perturbed["depth"] == 6
    assert perturbed["booster"] in ("gbtree", "gblinear")  # a neighbour
    at_the_edge = population.explore({"lr": 0.1, "momentum": 0.9, "depth": 6, "booster": "gbtree"})
    assert (at_the_edge["lr"], at_the_edge["depth"]) == (0.1, 6)
    assert at_the_edge["momentum"] == 0.9
    assert at_the_edge["booster"] in ("gbtree", "dart")
    drawn = _population(ranges, resample_probability=1.0)
    for _ in range(50):
        config = drawn.explore({"lr": 0.01, "momentum": 0.99, "depth": 5, "booster": "dart"})
        assert 1e-4 <= float(config["lr"]) <= 1e-1  # type: ignore[arg-type]
        assert 0.9 <= float(config["momentum"]) <= 0.999  # type: ignore[arg-type]
        assert isinstance(config["depth"], int) and 1 <= config["depth"] <= 6
        assert config["booster"] in ("gbtree", "dart", "gblinear")


def test_a_tuned_cluster_size_is_the_donors() -> None:
    ranges: dict[str, Range] = {**RANGES, "instance_count": IntegerRange(min_value=1, max_value=4)}
    population = _population(ranges, resample_probability=1.0)
    for _ in range(20):
        assert population.explore({"x": 0.5, "instance_count": 3})["instance_count"] == 3


def test_a_restart_replays_without_deciding_then_fills_the_population_up() -> None:
    before = _population()
    configs = {number: before.suggest() for number in range(4)}
    population = _population()
    for number, suggestion in configs.items():
        assert suggestion is not None
        ended = TrialResult(number, None) if number == 0 else None  # trial 0 ended, the rest go on
        population.searcher.restore(number, suggestion.config, ended)
    for member, value in enumerate([0.1, 0.2, 0.3, 0.4]):
        population.scheduler.on_report(member, 1, value)
        population.scheduler.on_report(member, 2, value)  # at its interval: no decision
    population.scheduler.on_end(0)  # exploited before the restart; its new trial never began
    population.restored()
    refill = population.suggest()
    assert refill is not None and (refill.number, refill.parent) == (4, 3)  # copies the best
    assert population.suggest() is None


# -- through the tuning loop, on simulated trials ------------------------------------------


def _pbt_job(**changes: Any) -> dict[str, Any]:
    raw: dict[str, Any] = {
        "name": "pbt",
        "objective_metric": "accuracy",
        "strategy": "PBT",
        "pbt": {"perturbation_interval": 2},
        "max_jobs": 16,
        "max_parallel_jobs": 4,
        "seed": 1,
        "ranges": {"x": {"type": "Continuous", "min_value": 0, "max_value": 1}},
        "training": {
            "algorithm": "script",
            "instance_count": 1,
            "script": {"entry_point": "simulated-trial"},
        },
    }
    raw.update(changes)
    return raw


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    with Store(f"sqlite:///{tmp_path / 's.db'}") as opened:
        yield opened


def _simulate(store: Store, raw: dict[str, Any]) -> str:
    spec = tuning_spec_from_dict(raw)
    return simulate_tuning(spec, RisingCurves(), store, start_time=1_000.0).id


def test_exploited_trials_hand_their_place_to_copies_of_better_ones(store: Store) -> None:
    tuning_id = _simulate(
        store, _pbt_job(pbt={"perturbation_interval": 2, "resample_probability": 0})
    )
    trials = {t.trial_number: t for t in store.training_jobs_of(tuning_id)}
    assert 4 < len(trials) <= 16
    frame = analytics_dataframe(store, tuning_id)
    children = frame[frame["ParentTrial"].notna()]
    assert len(children) == len(trials) - 4  # every trial past the first four is a copy
    exploited = [t for t in trials.values() if "exploited at step" in (t.failure_reason or "")]
    assert len(exploited) == len(children)  # each copy took an exploited member's place
    for row in children.to_dict("records"):
        child = trials[int(row["TrainingJobName"][-3:])]
        parent = trials[int(row["ParentTrial"])]
        step = int(row["ParentCheckpointStep"])
        # Its curve: the parent's reports up to the checkpoint, then its own from there.
        inherited = [(p.step, p.value) for p in store.metrics(parent.id, "accuracy")]
        mine = [(p.step, p.value) for p in store.metrics(child.id, "accuracy")]
        assert mine[:step] == [point for point in inherited if point[0] <= step]
        assert [s for s, _ in mine[step:]] == list(range(step + 1, len(mine) + 1))
        assert store.attempts.of(child.id)[0].resumed_from_step == step
        # Its settings: the parent's, times 1.2 or 0.8, within the range.
        x = parent.hyperparameters["x"]
        assert child.hyperparameters["x"] in (
            pytest.approx(min(x * 1.2, 1.0)),
            pytest.approx(x * 0.8),
        )
    # The population trained side by side, never more of it at once.
    moments = sorted(
        [(t.start_time, 1) for t in trials.values()] + [(t.end_time, -1) for t in trials.values()],
        key=lambda event: (event[0], event[1]),
    )
    running = [sum(change for _, change in moments[: i + 1]) for i in range(len(moments))]
    assert max(running) == 4
    best = max(trials.values(), key=lambda t: t.objective or 0)
    assert best.hyperparameters["x"] > 0.8


def test_a_pbt_job_replays_as_itself_or_as_another_strategy(store: Store) -> None:
    tuning_id = _simulate(store, _pbt_job())
    replayed = replay_tuning(store, tuning_id, start_time=9_000.0)
    assert replayed.status is JobStatus.COMPLETED
    frame = analytics_dataframe(store, replayed.id)
    assert frame["ParentTrial"].notna().any()
    as_random = replay_tuning(store, tuning_id, ["strategy=Random"], start_time=9_000.0)
    assert as_random.status is JobStatus.COMPLETED
    assert as_random.spec.get("pbt") is None
    assert analytics_dataframe(store, as_random.id)["ParentTrial"].isna().all()


class _DonorsLate(SimulatedTrialRunner):
    """A copy's start finds its donor's newest checkpoint not usable yet (its reports on
    their way to the store, the checkpoint before it pruned): the first time, or always."""

    def __init__(self, store: Store, clock: SimulatedClock, *, always: bool = False) -> None:
        super().__init__(store, RisingCurves(), clock)
        self.always, self.refused = always, Counter[int]()

    def prepare(
        self, spec: TrainingJobSpec, *, job_id: str, tuning_job_id: str, trial_number: int
    ) -> int | None:
        copy = spec.checkpoint.start_from is not None
        if copy and (self.always or not self.refused[trial_number]):
            self.refused[trial_number] += 1
            raise CheckpointNotReadyError("checkpoint.start_from.job: no complete checkpoint yet")
        return super().prepare(
            spec, job_id=job_id, tuning_job_id=tuning_job_id, trial_number=trial_number
        )


@pytest.mark.parametrize("synchronous", [False, True], ids=["async", "sync"])
@pytest.mark.parametrize("always", [False, True], ids=["late", "never"])
def test_a_copy_waits_for_its_running_donors_checkpoint(
    store: Store, always: bool, synchronous: bool
) -> None:
    """A copy whose donor's checkpoint is not usable yet starts at a later round, not as a
    trial that failed; one whose donor ends first (its reports all stored) fails, and a
    synchronous population does not wait for it."""
    pbt = {"perturbation_interval": 2, "synchronous": synchronous}
    spec = tuning_spec_from_dict(_pbt_job(pbt=pbt))
    clock = SimulatedClock(1_000.0)
    runner = _DonorsLate(store, clock, always=always)
    controller = TuningController(runner, clock=clock)
    tuning_id = controller.create(spec)
    assert controller.run(tuning_id, spec).status is JobStatus.COMPLETED
    trials = store.training_jobs_of(tuning_id)
    copies = [t for t in trials if (t.trial_number or 0) >= 4]
    assert copies and runner.refused  # copies were made, and refused at first
    failed = [t for t in copies if t.status is JobStatus.FAILED]
    if always:
        assert failed == copies
        assert all("no complete checkpoint yet" in (t.failure_reason or "") for t in failed)
    else:
        assert failed == [] and set(runner.refused.values()) == {1}
        children = analytics_dataframe(store, tuning_id)["ParentTrial"].notna()
        assert int(children.sum()) == len(copies)  # each one started from its donor
