"""A checkpoint due by the clock comes every `every_seconds` on a multi-worker job, on every
algorithm: every rank restarts its interval when the ranks agree on one, not only the rank
that saves it (else the others find one due at every agreement after the first)."""

from __future__ import annotations

from typing import Any

import pytest

from scaletune.api import Session
from scaletune.spec import training_spec_from_dict
from scaletune.store import JobStatus

EVERY_SECONDS = 0.5
CANCER = {"dataset": "breast-cancer"}
DIGITS = {"dataset": "digits"}


@pytest.mark.parametrize(
    ("algorithm", "hyperparameters", "channel"),
    [
        ("xgboost", {"num_round": 400, "max_depth": 3}, CANCER),
        ("lightgbm", {"num_boost_round": 1000, "num_leaves": 7}, CANCER),
        ("dnn", {"epochs": 8, "hidden_units": 32, "batch_size": 8}, DIGITS),
    ],
)
def test_checkpoints_by_the_clock_come_at_its_interval_not_at_every_agreement(
    session: Session, algorithm: str, hyperparameters: dict[str, Any], channel: dict[str, str]
) -> None:
    spec = training_spec_from_dict(
        {
            "algorithm": algorithm,
            "instance_count": 3,
            "hyperparameters": hyperparameters,
            "channels": {"train": channel, "validation": channel},
            "checkpoint": {"every_seconds": EVERY_SECONDS, "keep": 1000},
        }
    )
    job = session.controller.prepare(spec)
    record = session.controller.run(job)
    assert record.status is JobStatus.COMPLETED, record.failure_reason
    assert job.checkpoints is not None
    saved = len(job.checkpoints.complete())
    # At most one per interval of the job's time (the last at its end too), on a loaded
    # machine as on a quiet one: a slower run has more intervals. At least one once the job
    # outlasted three intervals: a shorter one may end first (warm workers ran LightGBM's
    # 400 rounds in 0.46 s, start and all).
    wall = record.wall_seconds or 0.0
    least = 1 if wall >= 3 * EVERY_SECONDS else 0
    assert least <= saved <= wall / EVERY_SECONDS + 2, (saved, wall)
