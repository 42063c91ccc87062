"""The reference's DNN experiment in TensorFlow: MNIST under ParameterServerStrategy on 1 and
4 workers with one worker's settings, then 4 workers with settings Hyperband found, beside the
built-in PyTorch DNN's asynchronous parameter server (benchmarks/results/dnn_modes.json) and
the reference's 0.97 -> 0.11.

Every case is `examples/tf-parameter-server-mnist.toml` (`examples/scripts/tf_mnist.py`: a
784-128-10 Keras MLP, SGD, batch 64 per worker, a chief and one parameter server beside the
workers). The tuning job is `examples/tuning-tf-parameter-server-mnist.toml` on 4 workers
(learning rate and momentum; Hyperband, one epoch to `--epochs`); its best settings are then
run again to the end, as the tuned case.

    python -m benchmarks.tensorflow.convergence [--epochs 5] [--workers 4] [--max-jobs 6]
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path
from typing import Any

from benchmarks._report import MNIST_FOLDER, RESULTS, write
from scaletune.analysis import summarize
from scaletune.api import Session
from scaletune.spec import load_training_spec, load_tuning_spec
from scaletune.store import TrainingJobRecord
from scaletune.tuning import TuningController

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
NAIVE = {"learning_rate": 0.05, "momentum": 0.9}  # one worker's settings, as dnn_modes uses
REFERENCE = (0.97, 0.11)  # the reference's validation accuracy, 1 and 4 workers


def _data() -> list[str]:
    return [
        f"channels.train.dataset_file={MNIST_FOLDER}",
        f"channels.validation.dataset_file={MNIST_FOLDER}",
    ]


def run(
    session: Session, workers: int, epochs: int, settings: dict[str, float]
) -> TrainingJobRecord:
    overrides = [
        *_data(),
        f"instance_count={workers}",
        f"hyperparameters.epochs={epochs}",
        *(f"hyperparameters.{name}={value}" for name, value in settings.items()),
    ]
    spec = load_training_spec(EXAMPLES / "tf-parameter-server-mnist.toml", overrides)
    record = session.controller.run(session.controller.prepare(spec))
    if record.status.value != "Completed":
        raise RuntimeError(f"{workers} worker(s), {settings}: {record.failure_reason}")
    return record


def curve(session: Session, record: TrainingJobRecord) -> list[float]:
    return [round(p.value, 4) for p in session.store.metrics(record.id, "validation:accuracy")]


def pytorch_rows() -> list[dict[str, Any]]:
    """The built-in DNN's asynchronous parameter server, 1 and 4 workers, as last measured."""
    measured = json.loads((RESULTS / "dnn_modes.json").read_text())
    return [
        case
        for case in measured["cases"]
        if case["group"] == "table" and case["case"] == "parameter server, async"
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--max-jobs", type=int, default=6)
    args = parser.parse_args()
    cases: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        for workers in (1, args.workers):
            record = run(session, workers, args.epochs, NAIVE)
            cases.append(_case("naive", workers, NAIVE, record, curve(session, record)))
            print(cases[-1], flush=True)
        tuning = load_tuning_spec(
            EXAMPLES / "tuning-tf-parameter-server-mnist.toml",
            [
                *(f"training.{override}" for override in _data()),
                f"training.instance_count={args.workers}",
                f"training.hyperparameters.epochs={args.epochs}",
                f"hyperband.max_resource={args.epochs}",
                f"max_jobs={args.max_jobs}",
            ],
        )
        controller = TuningController(session.controller)
        tuning_id = controller.create(tuning)
        controller.run(tuning_id, tuning)
        summary = summarize(session.store, tuning_id)
        assert summary.best is not None
        best = {name: float(summary.best.hyperparameters[name]) for name in NAIVE}
        record = run(session, args.workers, args.epochs, best)
        tuned = _case("tuned", args.workers, best, record, curve(session, record))
        tuned["tuning"] = {
            "trials": sum(summary.job_counts.values()),
            "stopped": summary.job_counts.get("Stopped", 0),
            "billable_seconds": summary.billable_seconds,
            "best_trial_objective": summary.best.objective,
        }
        cases.append(tuned)
        print(cases[-1], flush=True)
    _write(args, cases)


def _case(
    label: str,
    workers: int,
    settings: dict[str, float],
    record: TrainingJobRecord,
    accuracy: list[float],
) -> dict[str, Any]:
    return {
        "case": label,
        "workers": workers,
        "settings": settings,
        "validation_accuracy": record.final_metrics["validation:accuracy"],
        "validation_accuracy_by_epoch": accuracy,
        "wall_seconds": record.wall_seconds,
        "billable_seconds": record.billable_seconds,
    }


def _write(args: argparse.Namespace, cases: list[dict[str, Any]]) -> None:
    rows = [["job", "workers", "settings", "validation accuracy", "wall s", "billable worker-s"]]
    for case in cases:
        settings = ", ".join(f"{k} {v:.3g}" for k, v in case["settings"].items())
        rows.append(
            [
                f"TensorFlow PS, {case['case']}",
                str(case["workers"]),
                settings,
                f"{case['validation_accuracy']:.4f}",
                f"{case['wall_seconds']:.0f}",
                f"{case['billable_seconds']:.0f}",
            ]
        )
    for case in pytorch_rows():
        rows.append(
            [
                "built-in PyTorch DNN, async PS, naive",
                str(case["workers"]),
                "learning_rate 0.05, momentum 0.9",
                f"{case['final_metrics']['validation:accuracy']:.4f}",
                f"{case['wall_seconds']:.0f}",
                "",
            ]
        )
    for workers, accuracy in zip((1, 4), REFERENCE, strict=True):
        reference = "reference (TensorFlow, managed PS)"
        rows.append([reference, str(workers), "naive", f"{accuracy:.2f}", "", ""])
    tuned = next(case for case in cases if case["case"] == "tuned")
    write(
        "tf_convergence",
        "The reference's DNN experiment in TensorFlow: parameter-server strategy, 1 vs 4 workers",
        {"epochs": args.epochs, "workers": args.workers, "max_jobs": args.max_jobs, "cases": cases},
        rows,
        f"""
MNIST (55,000 training rows; validation: the last 5,000 training images), {args.epochs} epochs,
batch 64 per worker, a 784-128-10 Keras MLP under TensorFlow's ParameterServerStrategy (a chief,
the workers and one parameter server, all on this 2-core machine). Each epoch is 859 steps
whatever the worker count: under this strategy a step is one batch on one worker, so more
workers share the epoch's steps rather than take bigger ones. Tuning: Hyperband over learning
rate and momentum on {args.workers} workers, {tuned["tuning"]["trials"]} trials
({tuned["tuning"]["stopped"]} stopped early), {tuned["tuning"]["billable_seconds"]:.0f}
billable worker-seconds; the best settings were then run again from scratch (the tuned row).
Validation accuracy by epoch is in tf_convergence.json.
""",
    )


if __name__ == "__main__":
    main()
