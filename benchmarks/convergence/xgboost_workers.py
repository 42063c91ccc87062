"""Does distributed XGBoost drift with the worker count, and does quantisation stop it?

For 1-4 workers: final validation and test AUC on bank marketing (the reference's job) and on
scikit-learn's breast cancer set (continuous features, max_bin=16 so sketches must merge),
each with and without quantize_features. Deterministic: one run per cell.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._report import BANK_MARKETING_FILE as BANK
from benchmarks._report import write
from scaletune.algorithms.xgboost import REFERENCE_HYPERPARAMETERS as REFERENCE
from scaletune.api import Estimator, Session

CASES: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    "bank-marketing": (REFERENCE, {"dataset": "bank-marketing", "dataset_file": str(BANK)}),
    "breast-cancer (max_bin=16)": (
        {"num_round": 50, "max_bin": 16, "eval_metric": "auc", "max_depth": 4, "eta": 0.3},
        {"dataset": "breast-cancer"},
    ),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3, 4])
    args = parser.parse_args()
    rows = [["data", "quantize_features", *[f"{n} worker(s)" for n in args.workers], "largest gap"]]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        for case, (hyperparameters, channel) in CASES.items():
            for quantize in (False, True):
                aucs = []
                for workers in args.workers:
                    job = Estimator(
                        "xgboost",
                        {**hyperparameters, "quantize_features": quantize},
                        instance_count=workers,
                        session=session,
                    ).fit({"train": channel, "validation": channel, "test": channel})
                    metrics = job.describe().final_metrics
                    aucs.append((metrics["validation:auc"], metrics["test:auc"]))
                results[f"{case}, quantize={quantize}"] = {
                    str(n): {"validation_auc": v, "test_auc": t}
                    for n, (v, t) in zip(args.workers, aucs, strict=True)
                }
                gap = max(v for v, _ in aucs) - min(v for v, _ in aucs)
                rows.append(
                    [
                        case,
                        str(quantize).lower(),
                        *[f"{v:.4f} / {t:.4f}" for v, t in aucs],
                        f"{gap:.4f}",
                    ]
                )
    write(
        "xgboost_workers",
        "Distributed XGBoost: AUC against the number of workers",
        {"auc": results},
        rows,
        """
Cells are final validation AUC / test AUC; "largest gap" is the spread of validation AUC across
worker counts. Bank marketing's features each have at most 256 distinct values, so every
worker's quantile sketch is exact and the worker count cannot change the trees: the reference's
0.78 → 0.63 drop at 3 workers does not come from data parallelism itself here. Breast cancer's
continuous features at max_bin=16 force approximate sketch merging, which is where the worker
count shows; quantize_features bins each feature on the whole training channel first, after
which 1 to 4 workers build the same model.
""",
    )


if __name__ == "__main__":
    main()
