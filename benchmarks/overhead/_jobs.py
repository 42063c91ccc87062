"""A whole job through the controller, timed: what the start-up benchmarks compare."""

from __future__ import annotations

import time

from scaletune.api import Estimator

# What the local fork server imported before it imported only a job's own library: the
# benchmarks that compare with it start one so.
EVERY_LIBRARY = ("numpy", "pandas", "xgboost", "scaletune.algorithms")


def fit_seconds(estimator: Estimator, dataset: str) -> float:
    """Wall seconds of one job trained and validated on a bundled dataset; it must complete."""
    channel = {"dataset": dataset}
    started = time.perf_counter()
    job = estimator.fit({"train": channel, "validation": channel})
    elapsed = time.perf_counter() - started
    assert job.describe().status.value == "Completed"
    return elapsed
