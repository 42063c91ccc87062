"""A whole job through the controller, timed: what the start-up benchmarks compare."""

from __future__ import annotations

import time

from scaletune.api import Estimator


def fit_seconds(estimator: Estimator, dataset: str) -> float:
    """Wall seconds of one job trained and validated on a bundled dataset; it must complete."""
    channel = {"dataset": dataset}
    started = time.perf_counter()
    job = estimator.fit({"train": channel, "validation": channel})
    elapsed = time.perf_counter() - started
    assert job.describe().status.value == "Completed"
    return elapsed
