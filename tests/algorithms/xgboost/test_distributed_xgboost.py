"""Real distributed XGBoost on real data, 1 vs 3 workers."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import numpy as np
import pytest
import xgboost as xgb

from scaletune.algorithms.xgboost import REFERENCE_HYPERPARAMETERS
from scaletune.api import Estimator, Session
from scaletune.store import JobStatus
from tests.conftest import pid_alive, wait_until


def test_three_workers_match_one_on_bank_marketing(
    session: Session, bank_marketing_file: Path
) -> None:
    channel = {"dataset": "bank-marketing", "dataset_file": str(bank_marketing_file)}
    channels = {"train": channel, "validation": channel, "test": channel}
    records = {}
    for workers in (1, 3):
        job = Estimator(
            "xgboost", REFERENCE_HYPERPARAMETERS, instance_count=workers, seed=0, session=session
        ).fit(channels)
        records[workers] = job.describe()
        curve = job.metrics("validation:auc")
        assert list(curve["step"]) == list(range(1, 151))
    one, three = records[1], records[3]
    assert one.status is JobStatus.COMPLETED and three.status is JobStatus.COMPLETED
    assert three.billable_seconds == pytest.approx(3 * (three.wall_seconds or 0))
    auc_one, auc_three = one.final_metrics["validation:auc"], three.final_metrics["validation:auc"]
    assert 0.7 < auc_one < 0.85
    assert abs(auc_one - auc_three) <= 0.01
    assert "test:auc" in three.final_metrics
    booster = xgb.Booster(model_file=str(Path(three.artifact or "") / "xgboost-model.json"))
    assert booster.num_boosted_rounds() == 150


def test_quantised_features_give_the_same_model_on_any_worker_count(session: Session) -> None:
    channel = {"dataset": "breast-cancer"}  # continuous features: many distinct values
    hyperparameters = {
        "num_round": 20,
        "max_bin": 16,
        "quantize_features": True,
        "eval_metric": "logloss",
    }
    curves = []
    for workers in (1, 3):
        job = Estimator("xgboost", hyperparameters, instance_count=workers, session=session).fit(
            {"train": channel, "validation": channel}
        )
        record = job.describe()
        assert record.status is JobStatus.COMPLETED
        assert (Path(record.artifact or "") / "quantizer.json").exists()
        curves.append(job.metrics("validation:logloss")["value"].to_numpy())
    np.testing.assert_allclose(curves[0], curves[1], rtol=1e-5)


def test_killing_a_worker_mid_training_fails_the_job_with_that_worker(session: Session) -> None:
    channel = {"dataset": "breast-cancer"}
    job = Estimator(
        "xgboost",
        {"num_round": 100_000, "max_depth": 2},
        instance_count=3,
        retry={"max_attempts": 0},  # retried otherwise: tests/training/test_retries.py
        session=session,
    ).fit({"train": channel, "validation": channel}, wait=False)
    wait_until(lambda: len(job.metrics()) > 0)
    pids = job.worker_pids
    os.kill(pids[1], signal.SIGKILL)  # its peers are inside a collective when it goes
    record = job.wait(timeout=60)
    assert record.status is JobStatus.FAILED
    assert record.failure_reason == "worker 1 exited unexpectedly (killed by SIGKILL)"
    assert not any(pid_alive(pid) for pid in pids)
    assert record.artifact is None
