"""The reference's tuning experiment, side by side in one run (REFERENCE.md section 2).

3-worker XGBoost on UCI bank marketing, the reference's 7 ranges, 30 jobs, 4 in parallel:
  (a) Hyperband (its searcher: --searcher, Bayesian by default), stopping the trials that do
      not rank at a rung,
  (a2) Hyperband with scaletune's default settings (searcher, type, brackets),
  (b) the same searcher with no early stopping,
  (c) random search with no early stopping,
plus the 1-worker and 3-worker jobs with the reference's static hyperparameters.
Reported: best validation AUC, billable worker-seconds and wall time of each, and the ratios
the issue sets as goals: cost (a)/(b) <= 1/3, wall (a)/(b) <= 1/2, best AUC (a) >= 1 worker's.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from benchmarks._report import BANK_MARKETING_FILE, write
from scaletune.algorithms.xgboost import REFERENCE_HYPERPARAMETERS
from scaletune.analysis import summarize
from scaletune.api import Estimator, Session
from scaletune.spec import TuningJobSpec, apply_override, tuning_spec_from_dict
from scaletune.tuning import TuningController

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "tuning-bank-marketing.toml"


def seeded_job_parser(description: str | None, seeds: int) -> argparse.ArgumentParser:
    """What every benchmark that runs the reference's job seed by seed is asked: how many
    seeds (0, 1, ...), jobs per tuning job and jobs at once. Parse with `seeded_job_args`."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seeds", type=int, default=seeds, help="tuning jobs per variant")
    parser.add_argument("--max-jobs", type=int, default=30)
    parser.add_argument("--parallel", type=int, default=4)
    return parser


def seeded_job_args(parser: argparse.ArgumentParser) -> argparse.Namespace:
    args = parser.parse_args()
    if args.seeds < 1:
        parser.error(f"--seeds {args.seeds}: need 1 or more")
    return args


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--max-jobs", type=int, default=30)
    parser.add_argument("--parallel", type=int, default=4)
    parser.add_argument("--searcher", choices=["Random", "Bayesian"], default="Bayesian")
    parser.add_argument("--max-resource", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0, help="the first seed")
    parser.add_argument("--seeds", type=int, default=1, help="tuning jobs per variant")
    args = parser.parse_args()
    variants = {
        f"(a) Hyperband, stopping ({args.searcher} proposals)": [
            "strategy=Hyperband",
            f"hyperband.searcher={args.searcher}",
            f"hyperband.max_resource={args.max_resource}",
            "hyperband.type='stopping'",
        ],
        "(a2) Hyperband, scaletune's defaults": [
            "strategy=Hyperband",
            f"hyperband.max_resource={args.max_resource}",
        ],
        f"(b) {args.searcher}, no early stopping": [f"strategy={args.searcher}"],
        "(c) Random, no early stopping": ["strategy=Random"],
    }
    runs: dict[str, list[dict[str, Any]]] = {}
    channel = {"dataset": "bank-marketing", "dataset_file": str(BANK_MARKETING_FILE)}
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        session.backend.prestart(args.parallel * 3)  # every variant finds its workers warm
        for workers in (1, 3):
            job = Estimator(
                "xgboost", REFERENCE_HYPERPARAMETERS, instance_count=workers, session=session
            ).fit({"train": channel, "validation": channel})
            record = job.describe()
            runs[f"static, {workers} worker(s)"] = [
                {
                    "best_validation_auc": record.final_metrics["validation:auc"],
                    "billable_seconds": record.billable_seconds,
                    "wall_seconds": record.wall_seconds,
                    "jobs": 1,
                }
            ]
        for seed in range(args.seed, args.seed + args.seeds):
            for label, overrides in variants.items():
                tuning_id = run_reference_job(
                    session, seed, args, overrides, hyperband="Hyperband" in label
                )
                summary = summarize(session.store, tuning_id).to_json_dict()
                runs.setdefault(label, []).append(
                    {
                        "seed": seed,
                        "best_validation_auc": summary["best_objective"],
                        "billable_seconds": summary["billable_seconds"],
                        "wall_seconds": summary["wall_seconds"],
                        "jobs": sum(summary["job_counts"].values()),
                        "job_counts": summary["job_counts"],
                        "best_hyperparameters": summary["best_hyperparameters"],
                    }
                )
    results = {label: _mean(entries) for label, entries in runs.items()}
    a, a2, b, c = (results[label] for label in variants)
    baseline = results["static, 1 worker(s)"]["best_validation_auc"]
    goals = {
        "cost (a)/(b)": a["billable_seconds"] / b["billable_seconds"],
        "wall (a)/(b)": a["wall_seconds"] / b["wall_seconds"],
        "best AUC (a) - 1 worker": a["best_validation_auc"] - baseline,
        "cost (a2)/(b)": a2["billable_seconds"] / b["billable_seconds"],
        "wall (a2)/(b)": a2["wall_seconds"] / b["wall_seconds"],
        "best AUC (a2) - (b)": a2["best_validation_auc"] - b["best_validation_auc"],
        "best AUC (a) - (b)": a["best_validation_auc"] - b["best_validation_auc"],
        "cost (a2)/(c)": a2["billable_seconds"] / c["billable_seconds"],
        "best AUC (a2) - (c)": a2["best_validation_auc"] - c["best_validation_auc"],
    }
    rows = [["run", "jobs", "best validation AUC", "billable worker-s", "wall s"]]
    for label, result in results.items():
        rows.append(
            [
                label,
                f"{result['jobs']:g}",
                _with_spread(result, "best_validation_auc", "{:.4f}"),
                _with_spread(result, "billable_seconds", "{:.0f}"),
                _with_spread(result, "wall_seconds", "{:.0f}"),
            ]
        )
    seeds = f"seeds {args.seed}..{args.seed + args.seeds - 1}" if args.seeds > 1 else "one seed"
    write(
        "tuning_reference" if args.searcher == "Bayesian" else "tuning_reference_random",
        "The reference's tuning experiment: Hyperband vs no early stopping",
        {"results": results, "runs": runs, "goals": goals, "settings": vars(args)},
        rows,
        f"""
Each tuning variant ran with {seeds}: mean, and (where more than one) the standard deviation
over seeds in brackets. Goals from the issues, on the means: cost (a)/(b) =
{goals["cost (a)/(b)"]:.2f} (goal <= 0.33; the reference reached 0.33), wall (a)/(b) =
{goals["wall (a)/(b)"]:.2f} (goal <= 0.5), best AUC of (a) minus the 1-worker baseline =
{goals["best AUC (a) - 1 worker"]:+.4f} (goal >= 0). With scaletune's default Hyperband
settings (a2): cost (a2)/(b) = {goals["cost (a2)/(b)"]:.2f} (goal <= 0.25), wall (a2)/(b) =
{goals["wall (a2)/(b)"]:.2f}, best AUC (a2) minus (b) = {goals["best AUC (a2) - (b)"]:+.4f}
(goal >= 0; (a): {goals["best AUC (a) - (b)"]:+.4f}). Against random search run to the end
(c), the issue's yardstick: (a2) costs {goals["cost (a2)/(c)"]:.2f} of it (goal <= 0.25) and
finds {goals["best AUC (a2) - (c)"]:+.4f} AUC (goal >= 0).
Hyperband's resource is the boosting round (min_resource 1, max_resource {args.max_resource},
eta 3); every trial uses 3 workers; the 2-core machine runs up to {args.parallel * 3} worker
processes at once.
""",
    )


def _mean(entries: list[dict[str, Any]]) -> dict[str, Any]:
    """Means over seeds of the figures, with their standard deviations (`<name>_std`)."""
    result: dict[str, Any] = {}
    for name in ("best_validation_auc", "billable_seconds", "wall_seconds", "jobs"):
        values = [float(entry[name]) for entry in entries]
        result[name] = statistics.fmean(values)
        result[f"{name}_std"] = statistics.stdev(values) if len(values) > 1 else None
    return result


def _with_spread(result: dict[str, Any], name: str, form: str) -> str:
    std = result[f"{name}_std"]
    return form.format(result[name]) + ("" if std is None else f" ({form.format(std)})")


def run_reference_job(
    session: Session,
    seed: int,
    args: argparse.Namespace,
    overrides: list[str],
    *,
    hyperband: bool,
) -> str:
    """The reference's tuning job (`args.max_jobs` jobs, `args.parallel` at once) on the
    bank marketing file with these overrides, run to its end: its id in the session's store."""
    spec = _variant(
        [
            f"max_jobs={args.max_jobs}",
            f"max_parallel_jobs={args.parallel}",
            f"seed={seed}",
            f"training.channels.train.dataset_file='{BANK_MARKETING_FILE}'",
            f"training.channels.validation.dataset_file='{BANK_MARKETING_FILE}'",
            *overrides,
        ],
        hyperband=hyperband,
    )
    controller = TuningController(session.controller)
    tuning_id = controller.create(spec)
    controller.run(tuning_id, spec)
    return tuning_id


def _variant(overrides: list[str], *, hyperband: bool) -> TuningJobSpec:
    """The example tuning file with overrides; its [hyperband] table only for Hyperband."""
    raw = tomllib.loads(EXAMPLE.read_text())
    if not hyperband:
        raw.pop("hyperband")
    for override in overrides:
        apply_override(raw, override)
    return tuning_spec_from_dict(raw, base_dir=EXAMPLE.parent)


if __name__ == "__main__":
    main()
