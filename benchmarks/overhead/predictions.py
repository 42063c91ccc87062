"""Batch prediction's throughput: rows scored a second by a bank marketing model (XGBoost, the
reference's job; LightGBM, its defaults) on 1 worker (in the calling process) and on 3 (rows
split, order kept), at 1k, 10k and 100k rows (the test split repeated). Each figure is the
median of the repeats of `TrainingJob.predict`, the model's loading and the workers' start
included: what a user waits for.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
from pathlib import Path

import numpy as np

from benchmarks._report import BANK_MARKETING_FILE as BANK
from benchmarks._report import write
from scaletune.algorithms.lightgbm import BANK_MARKETING_HYPERPARAMETERS as LIGHTGBM
from scaletune.algorithms.xgboost import REFERENCE_HYPERPARAMETERS as XGBOOST
from scaletune.api import Estimator, Session
from scaletune.data import Table, prepare_bank_marketing
from scaletune.store import JobStatus


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 3])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    test = prepare_bank_marketing(BANK)["test"]
    channel = {"dataset": "bank-marketing", "dataset_file": str(BANK)}
    rows = [["model", "rows", *[f"{n} worker(s): rows/s" for n in args.workers]]]
    results: dict[str, dict[str, dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        for algorithm, hyperparameters in (("xgboost", XGBOOST), ("lightgbm", LIGHTGBM)):
            job = Estimator(algorithm, hyperparameters, instance_count=1, session=session).fit(
                {"train": channel}
            )
            record = job.describe()
            assert record.status is JobStatus.COMPLETED, record.failure_reason
            for size in args.sizes:
                repeat = np.resize(np.arange(test.n_rows), size)
                table = Table(test.features[repeat], test.labels[repeat], "bank marketing test")
                cells = {}
                for workers in args.workers:
                    seconds = [
                        job.predict(table, instance_count=workers, backend=session.backend).seconds
                        for _ in range(args.repeats)
                    ]
                    cells[str(workers)] = size / statistics.median(seconds)
                results.setdefault(algorithm, {})[str(size)] = cells
                shown = [f"{cells[str(n)]:,.0f}" for n in args.workers]
                rows.append([algorithm, f"{size:,}", *shown])
    write(
        "prediction_throughput",
        "Batch prediction: rows scored a second, 1 worker and 3",
        results,
        rows,
        f"""
Medians of {args.repeats} calls each. One worker scores in the calling process: loading the
model and scoring are all it costs. Three workers add their start on the session's warm pool
and the rows' trip through shard files, which small tables do not repay on this 2-core
machine; they pay where scoring dominates and cores are free.
""",
    )


if __name__ == "__main__":
    main()
