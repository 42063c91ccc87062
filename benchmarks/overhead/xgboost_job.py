"""scaletune's 3-worker XGBoost round time vs a plain xgboost.collective script.

The reference's job (bank marketing, 150 rounds, its static hyperparameters, hist), the same
shards, threads and evaluation sets in both. A run's step time is the median time between the
ends of successive rounds on rank 0 (start-up is left out of both, and a pause of the shared
machine does not move a median). Runs alternate; the ratio is of the medians over runs.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np

from benchmarks._baseline import save_splits
from benchmarks._plain_xgboost import run_plain
from benchmarks._report import BANK_MARKETING_FILE as BANK
from benchmarks._report import Paired, spread, write
from scaletune.algorithms.xgboost import REFERENCE_HYPERPARAMETERS as HYPERPARAMETERS
from scaletune.algorithms.xgboost import XGBoostHyperparameters
from scaletune.algorithms.xgboost._program import sampler_period
from scaletune.api import Estimator, Session
from scaletune.data import prepare_bank_marketing

WORKERS = 3


def _step_seconds(times: list[float]) -> float:
    return float(np.median(np.diff(times)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--data", type=Path, default=BANK)
    args = parser.parse_args()
    splits = prepare_bank_marketing(args.data)
    reference = XGBoostHyperparameters.model_validate(HYPERPARAMETERS)
    # The threads scaletune gives each worker: the cores shared out.
    params = reference.booster_params(seed=0, nthread=max(1, (os.cpu_count() or 1) // WORKERS))
    period = sampler_period(reference.samples, None)
    plain_steps, ours_steps, plain_auc, ours_auc = [], [], [], []
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch)
        save_splits(splits, data)
        channel = {"dataset": "bank-marketing", "dataset_file": str(args.data)}
        with Session(data / "store.db") as session:
            for _ in range(args.repeats):
                times, auc = run_plain(data, params, reference.num_round, WORKERS, period)
                plain_steps.append(_step_seconds(times))
                plain_auc.append(auc)
                job = Estimator(
                    "xgboost", HYPERPARAMETERS, instance_count=WORKERS, session=session
                ).fit({"train": channel, "validation": channel})
                curve = job.metrics("validation:auc")
                stamps = [t.timestamp() for t in curve["time"]]
                ours_steps.append(_step_seconds(stamps))
                ours_auc.append(float(curve["value"].iloc[-1]))
    compared = Paired.of(plain_steps, ours_steps)
    write(
        "xgboost_overhead",
        "scaletune vs plain xgboost.collective: 3-worker round time",
        {
            "step_seconds": {"plain": plain_steps, "scaletune": ours_steps},
            **compared.results(),
            "validation_auc": {"plain": plain_auc, "scaletune": ours_auc},
        },
        [
            ["runner", "ms per round: median (min–max)", "final validation AUC", "ratio"],
            [
                "plain xgboost.collective script",
                spread(compared.plain, 1000),
                f"{plain_auc[0]:.4f}",
                "1.00",
            ],
            [
                "scaletune train (3 workers)",
                spread(compared.ours, 1000),
                f"{ours_auc[0]:.4f}",
                f"{compared.ratio:.3f}",
            ],
            compared.pairs_row(4),
        ],
        f"""
{args.repeats} runs each, alternating, of the reference's bank marketing job ({WORKERS} workers,
150 rounds, train and validation AUC every round, nthread={params["nthread"]} per worker).
scaletune's extra work per round is one metrics message from rank 0 to the controller, which
writes it to the store from its own process. The two final AUCs being equal shows the two runs
train the same model. Three workers share two cores here, so which processes share a core
moves a run's round time by up to ~25 %: the spread of the paired ratios is the resolution of
this comparison on this machine, and the ratio of medians should be read with it.
""",
    )


if __name__ == "__main__":
    main()
