"""What checkpoints cost a job: the same job with checkpoints off, at the default interval
(every 30 s) and dense (XGBoost every 10 rounds, the DNN every 200 updates), side by side.

Two jobs: the reference's 3-worker XGBoost job on bank marketing (150 rounds) and a 2-worker
DNN on MNIST (all-reduce, 3 epochs). A run's time is the job's wall time as recorded (workers
placed to model published; warm workers, so no process start). Runs alternate the three
settings; the overhead is the ratio of medians against "off", with the ratio within each
back-to-back pair for the noise.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._report import BANK_MARKETING_FILE, MNIST_FOLDER, Paired, spread, write
from scaletune.algorithms.xgboost import REFERENCE_HYPERPARAMETERS
from scaletune.api import Estimator, Session

DNN = {"hidden_units": 128, "batch_size": 64, "learning_rate": 0.05, "momentum": 0.9}
SETTINGS: dict[str, dict[str, Any]] = {
    "off": {"enabled": False},
    "default (every 30 s)": {},
}


def _jobs(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    bank, mnist, epochs = args.bank, args.mnist, args.epochs
    return {
        "xgboost": {
            "algorithm": "xgboost",
            "hyperparameters": REFERENCE_HYPERPARAMETERS,
            "workers": 3,
            "channel": {"dataset": "bank-marketing", "dataset_file": str(bank)},
            "dense": {"every_steps": 10},
            "dense_name": "every 10 rounds",
            "repeats": args.repeats,
        },
        "dnn": {
            "algorithm": "dnn",
            "hyperparameters": {**DNN, "epochs": epochs},
            "workers": 2,
            "channel": {"dataset": "mnist", "dataset_file": str(mnist)},
            "dense": {"every_steps": 200},
            "dense_name": "every 200 updates",
            "repeats": args.dnn_repeats,
        },
    }


def _run(session: Session, job: dict[str, Any], checkpoint: dict[str, Any]) -> tuple[float, int]:
    fitted = Estimator(
        job["algorithm"],
        job["hyperparameters"],
        instance_count=job["workers"],
        checkpoint=checkpoint,
        session=session,
    ).fit({"train": job["channel"], "validation": job["channel"]})
    record = fitted.describe()
    assert record.status.value == "Completed", record.failure_reason
    saved = fitted.attempts()[-1].checkpoint_step
    return float(record.wall_seconds or 0.0), 0 if saved is None else saved


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15, help="runs of each XGBoost setting")
    parser.add_argument("--dnn-repeats", type=int, default=6)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--bank", type=Path, default=BANK_MARKETING_FILE)
    parser.add_argument("--mnist", type=Path, default=MNIST_FOLDER)
    args = parser.parse_args()
    results: dict[str, Any] = {}
    rows = [
        [
            "job",
            "checkpoints",
            "wall s: median (min–max)",
            "vs off: ratio of medians",
            "paired ratios: median (min–max)",
        ]
    ]
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        session.backend.prestart(3)
        for name, job in _jobs(args).items():
            settings = {**SETTINGS, job["dense_name"]: job["dense"]}
            _run(session, job, {"enabled": False})  # warm-up: imports, the data's first read
            walls: dict[str, list[float]] = {label: [] for label in settings}
            last_step: dict[str, int] = {}
            labels = list(settings)
            for repeat in range(job["repeats"]):
                # Rotated every round, so that no setting always runs first or last.
                turn = repeat % len(labels)
                for label in labels[turn:] + labels[:turn]:
                    wall, step = _run(session, job, settings[label])
                    walls[label].append(wall)
                    last_step[label] = step
            results[name] = {"wall_seconds": walls, "last_checkpoint_step": last_step}
            for label in settings:
                compared = Paired.of(walls["off"], walls[label])
                results[name][label] = compared.results()
                ratio = "1.00" if label == "off" else f"{compared.ratio:.3f}"
                pairs = compared.pairs
                paired = (
                    ""
                    if label == "off"
                    else (f"{pairs['median']:.3f} ({pairs['min']:.3f}–{pairs['max']:.3f})")
                )
                rows.append(
                    [
                        f"{name} ({job['workers']} workers)",
                        label,
                        spread(compared.ours),
                        ratio,
                        paired,
                    ]
                )
    write(
        "checkpoint_overhead",
        "Checkpoint overhead: the same job with checkpoints off, default and dense",
        results,
        rows,
        f"""
{args.repeats} runs of each XGBoost setting and {args.dnn_repeats} of each DNN one, in
rounds whose order rotates (so that no setting always runs first), on one warm `Session`;
wall time as the job record has it. XGBoost: the reference's bank marketing job, 150
rounds; a checkpoint is the booster as binary JSON (a few hundred KB), written by rank 0
with an fsync and a manifest. DNN: MNIST, an MLP of {DNN["hidden_units"]} hidden units,
batch {DNN["batch_size"]} per worker, {args.epochs} epochs of about 430 updates; a
checkpoint is the model, the optimiser and each rank's state gathered to rank 0. At the
default interval (every 30 s) a job this short takes at most one checkpoint, so its cost
there is a time check per round or per 20 updates; the dense rows show what checkpoints
themselves cost. The paired ratios' spread is this shared 2-core machine's noise.
""",
    )


if __name__ == "__main__":
    main()
