"""LightGBM under tuning: Hyperband's rungs on boosting rounds, with real workers; the example
files load."""

from __future__ import annotations

import re
from pathlib import Path

from scaletune.api import Session
from scaletune.spec import load_training_spec, load_tuning_spec, tuning_spec_from_dict
from scaletune.store import JobStatus
from scaletune.tuning import TuningController

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
CHANNEL = {"dataset": "breast-cancer"}


def test_hyperband_stops_lightgbm_trials_at_its_rungs(session: Session) -> None:
    spec = tuning_spec_from_dict(
        {
            "objective_metric": "validation:binary_logloss",
            "objective_type": "Minimize",
            "strategy": "Hyperband",
            # A round of breast cancer takes about a millisecond: the workers wait at each
            # rung for its verdict (WorkerTask.judged_steps), or a trial would outrun it.
            "hyperband": {"min_resource": 9, "max_resource": 243, "eta": 3, "rank_by": "value"},
            "max_jobs": 6,
            "max_parallel_jobs": 2,
            "seed": 1,
            "ranges": {
                "learning_rate": {
                    "type": "Continuous",
                    "min_value": 1e-4,
                    "max_value": 0.5,
                    "scaling": "Logarithmic",
                }
            },
            "training": {
                "algorithm": "lightgbm",
                "hyperparameters": {"num_boost_round": 243, "num_leaves": 7},
                "channels": {"train": CHANNEL, "validation": CHANNEL},
            },
        }
    )
    tuner = TuningController(session.controller, poll_seconds=0.05)
    record = tuner.run(tuner.create(spec), spec)
    assert record.status is JobStatus.COMPLETED
    trials = session.store.training_jobs_of(record.id)
    stopped = [t for t in trials if t.status is JobStatus.STOPPED]
    assert stopped, [(t.hyperparameters["learning_rate"], t.status) for t in trials]
    for trial in stopped:  # judged at a rung of boosting rounds, and stopped right there
        rung = re.search(r"rung (9|27|81)\b", trial.failure_reason or "")
        assert rung, trial.failure_reason
        steps = [
            point.step for point in session.store.metrics(trial.id, "validation:binary_logloss")
        ]
        assert max(steps) == int(rung[1]), (trial.failure_reason, steps[-3:])
    best = session.store.get_training_job(record.best_training_job or "")
    assert best.status is JobStatus.COMPLETED


def test_the_example_files_load(bank_marketing_file: Path) -> None:
    job = load_training_spec(EXAMPLES / "lightgbm-bank-marketing.toml")
    assert (job.algorithm, job.instance_count) == ("lightgbm", 3)
    tuning = load_tuning_spec(EXAMPLES / "tuning-lightgbm-bank-marketing.toml")
    assert tuning.training.algorithm == "lightgbm"
    assert set(tuning.ranges) >= {"learning_rate", "num_leaves", "num_boost_round"}
