from __future__ import annotations

import pytest

from scaletune import ContinuousRange, Estimator, IntegerRange, Session, Tuner
from scaletune.errors import InvalidInputError

CHANNELS = {"train": {"dataset": "breast-cancer"}, "validation": {"dataset": "breast-cancer"}}


def _estimator(session: Session, num_round: int = 9) -> Estimator:
    return Estimator(
        "xgboost", {"num_round": num_round, "eval_metric": "auc"}, instance_count=2, session=session
    )


def test_fit_describe_best_and_analytics(session: Session) -> None:
    tuner = Tuner(
        _estimator(session),
        objective_metric_name="validation:auc",
        hyperparameter_ranges={
            "eta": ContinuousRange(min_value=0.05, max_value=1),
            "max_depth": {"type": "Integer", "min_value": 1, "max_value": 6},
        },
        strategy="Hyperband",
        hyperband={"min_resource": 1, "max_resource": 9},
        max_jobs=4,
        max_parallel_jobs=2,
        seed=1,
        first_configurations=[{"max_depth": 2}],  # eta: the middle of its range
    )
    job = tuner.fit(CHANNELS)
    description = tuner.describe()
    assert description["status"] == "Completed"
    assert sum(description["job_counts"].values()) == 4
    first = session.store.trials.rows(job.id)[0]
    assert (first.hyperparameters["eta"], first.hyperparameters["max_depth"]) == (
        pytest.approx(0.525),
        2,
    )
    assert tuner.best_training_job() == description["best_training_job"] is not None
    frame = tuner.analytics().dataframe()
    assert len(frame) == 4
    assert {"eta", "max_depth", "FinalObjectiveValue"} <= set(frame.columns)
    assert job.id == description["id"]


def test_fit_without_waiting_and_stop(session: Session) -> None:
    tuner = Tuner(
        _estimator(session, num_round=100_000),
        "validation:auc",
        {"eta": ContinuousRange(min_value=0.1, max_value=0.5)},
        strategy="Random",
        max_jobs=3,
        max_parallel_jobs=1,
    )
    job = tuner.fit(CHANNELS, wait=False)
    tuner.stop()
    assert job.wait(timeout=120)["status"] == "Stopped"


def test_bad_tuners_are_refused(session: Session) -> None:
    with pytest.raises(InvalidInputError, match="max_parallel_jobs=5 is more than max_jobs=2"):
        Tuner(
            _estimator(session),
            "validation:auc",
            {"max_depth": IntegerRange(min_value=1, max_value=3)},
            max_jobs=2,
            max_parallel_jobs=5,
        ).fit(CHANNELS)
    with pytest.raises(RuntimeError, match="call fit"):
        Tuner(_estimator(session), "validation:auc", {}).describe()


def test_several_objectives_and_a_constraint_through_the_api(session: Session) -> None:
    tuner = Tuner(
        _estimator(session),
        objective_metric_name="validation:auc",
        hyperparameter_ranges={
            "eta": ContinuousRange(min_value=0.05, max_value=1),
            "instance_count": IntegerRange(min_value=1, max_value=2),
        },
        objectives=[
            {"metric": "validation:auc", "type": "Maximize"},
            {"metric": "billable_seconds", "type": "Minimize"},
        ],
        constraints=["validation:auc >= 0.5"],
        strategy="Random",
        max_jobs=3,
        max_parallel_jobs=2,
    )
    tuner.fit(CHANNELS)
    description = tuner.describe()
    assert description["status"] == "Completed"
    assert description["constraints"] == ["validation:auc >= 0.5"]
    front = description["pareto_front"]
    assert front and all(p["objectives"]["validation:auc"] >= 0.5 for p in front)
    assert {p["instance_count"] for p in front} <= {1, 2}
    frame = tuner.analytics().dataframe()
    assert frame["ParetoFront"].sum() == len(front)


# Synchronous PBT: the members wait for each other at every 6th round, so they are ranked
# together however their starts spread on a busy machine (asynchronously, trials of 24 rounds,
# a fraction of a second, could train apart and never be compared).
def test_population_based_training_copies_checkpoints_between_real_trials(
    session: Session,
) -> None:
    estimator = Estimator(
        "xgboost",
        {"num_round": 24, "eval_metric": "auc"},
        instance_count=2,
        checkpoint={"every_steps": 6, "every_seconds": None},
        session=session,
    )
    tuner = Tuner(
        estimator,
        "validation:auc",
        {
            "eta": ContinuousRange(min_value=0.01, max_value=1),
            "max_depth": IntegerRange(min_value=1, max_value=6),
        },
        strategy="PBT",
        pbt={"perturbation_interval": 6, "resample_probability": 0, "synchronous": True},
        max_jobs=6,
        max_parallel_jobs=2,
        seed=3,
    )
    job = tuner.fit(CHANNELS)
    assert tuner.describe()["status"] == "Completed"
    frame = tuner.analytics().dataframe()
    children = frame[frame["ParentTrial"].notna()]
    store = session.store
    reports = {name: store.metrics(name, "validation:auc") for name in frame["TrainingJobName"]}
    # Each trial's first and last report: did they overlap?
    assert len(children) >= 1, {n: (r[0].time, r[-1].time) for n, r in reports.items() if r}
    for name in frame["TrainingJobName"]:  # exploited at a generation, and stopped right there
        reason = store.get_training_job(name).failure_reason or ""
        if reason.startswith("exploited at step "):
            step = int(reason.removeprefix("exploited at step ").split(":")[0])
            assert step % 6 == 0 and reports[name][-1].step == step, (name, reason)
    for row in children.to_dict("records"):
        child = store.get_training_job(row["TrainingJobName"])
        parent = store.get_training_job(f"{job.id}-{int(row['ParentTrial']):03d}")
        step = int(row["ParentCheckpointStep"])
        assert step % 6 == 0  # a checkpoint of the parent's, every 6 rounds
        (first, *_) = store.attempts.of(child.id)
        assert first.resumed_from_step == step  # its workers loaded the parent's trees
        theirs = [(p.step, p.value) for p in store.metrics(parent.id, "validation:auc")]
        ours = [(p.step, p.value) for p in store.metrics(child.id, "validation:auc")]
        assert ours[:step] == theirs[:step]
        assert [p for p, _ in ours] == list(range(1, len(ours) + 1))
        assert child.hyperparameters["eta"] in (
            pytest.approx(min(parent.hyperparameters["eta"] * 1.2, 1.0)),
            pytest.approx(parent.hyperparameters["eta"] * 0.8),
        )
