"""AdaScale in real data-parallel jobs (2 CPU workers): one worker's progress made whatever
the cluster, reported in one worker's epochs, through all-reduce and the parameter server."""

from __future__ import annotations

from typing import Any

import pytest

from scaletune.api import Estimator, Session
from scaletune.store import JobStatus

DIGITS = {"dataset": "digits"}
CHANNELS = {"train": DIGITS, "validation": DIGITS, "test": DIGITS}
SETTINGS = {
    "hidden_units": 32,
    "batch_size": 32,
    "learning_rate": 0.05,
    "momentum": 0.9,
    "epochs": 3,
    "seed": 4,
    "lr_scaling": "adascale",
}


@pytest.mark.parametrize(
    ("workers", "distribution", "accumulate"),
    [
        (2, {"strategy": "allreduce"}, 1),
        (2, {"strategy": "parameter_server", "mode": "sync"}, 1),
        (1, {"strategy": "allreduce"}, 2),  # S = 2 from micro-batches alone
    ],
    ids=["allreduce", "parameter-server-sync", "one-worker-accumulating"],
)
def test_adascale_makes_one_workers_progress_and_reports_its_epochs(
    session: Session, workers: int, distribution: dict[str, Any], accumulate: int
) -> None:
    job = Estimator(
        "dnn",
        {**SETTINGS, "gradient_accumulation_steps": accumulate},
        instance_count=workers,
        distribution=distribution,
        session=session,
    ).fit(CHANNELS)
    record = job.describe()
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    for name in ("validation:accuracy", "adascale:gain", "train:updates", "train:data_epochs"):
        assert list(job.metrics(name)["step"]) == [1, 2, 3]
    scale = workers * accumulate
    gains = list(job.metrics("adascale:gain")["value"])
    assert all(1.0 <= gain <= scale for gain in gains)
    assert max(gains) > 1.05  # the digits' gradients are noisy at a batch of 32
    # Progress is the sum of the gains: 3 one-worker epochs took between 3 / S and 3 passes
    # over the data at S times the batch, i.e. between 3 and 3 S epochs of the data.
    passes = record.final_metrics["train:data_epochs"]
    assert 3.0 <= passes <= 3.0 * scale + 0.1
    assert record.final_metrics["validation:accuracy"] > 0.85
    assert "gns:b_simple" in record.final_metrics
