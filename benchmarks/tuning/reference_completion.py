"""Completion rules on the reference's tuning job (issue 52): billable seconds saved against
validation AUC lost, for each rule, against the job run to its max_jobs.

The reference's tuning job (3-worker XGBoost on UCI bank marketing, the 7 ranges, 30 jobs, 4
in parallel; examples/tuning-bank-marketing.toml) with scaletune's defaults (Hyperband, one
bracket, LastValueTPE proposals, rungs ranking forecasts), on each seed once without a rule
and once with each, in an order that turns with the seed. Real runs: trials end in the order
the machine lets them, so a rule's run is close to, not exactly, the full run cut short.

    .venv/bin/python -m benchmarks.tuning.reference_completion --seeds 3    # a quick look
    .venv/bin/python -m benchmarks.tuning.reference_completion --seeds 10   # the committed run

Writes benchmarks/results/tuning_reference_completion.{json,md}.
"""

from __future__ import annotations

import statistics
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks._report import paired_interval, write
from benchmarks.tuning.reference import run_reference_job, seeded_job_args, seeded_job_parser
from scaletune.analysis import summarize
from scaletune.api import Session

FULL = "max_jobs (no rule)"
# Each rule's overrides; min_improvement_per_cost in AUC per billable worker-hour.
RULES: dict[str, list[str]] = {
    FULL: [],
    "convergence": ["completion.convergence=true"],
    "min_improvement_per_cost 0.03": ["completion.min_improvement_per_cost=0.03"],
    "min_improvement_per_cost 0.1": ["completion.min_improvement_per_cost=0.1"],
    "min_improvement_per_cost 0.3": ["completion.min_improvement_per_cost=0.3"],
}
GOAL_SAVED, GOAL_LOST = 0.30, 0.001  # 30 % saved at <= 0.1 AUC points (0.001) lost


def main() -> None:
    parser = seeded_job_parser(__doc__, seeds=3)
    args = seeded_job_args(parser)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in RULES}
    names = list(RULES)
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        session.backend.prestart(args.parallel * 3)
        for seed in range(args.seeds):
            turn = seed % len(names)
            for name in names[turn:] + names[:turn]:
                overrides = ["strategy=Hyperband", *RULES[name]]
                tuning_id = run_reference_job(session, seed, args, overrides, hyperband=True)
                summary = summarize(session.store, tuning_id).to_json_dict()
                runs[name].append(
                    {
                        "seed": seed,
                        "best_validation_auc": summary["best_objective"],
                        "billable_seconds": summary["billable_seconds"],
                        "trials": summary["trials"],
                        "ended": summary["completion_reason"],
                    }
                )
            found = ", ".join(f"{runs[n][-1]['best_validation_auc']:.4f}" for n in names)
            print(f"seed {seed}: best AUC {found} ({', '.join(names)})", flush=True)
    rng = np.random.default_rng(0)  # the bootstrap's draws
    rows = [
        [
            "rule",
            "trials: mean (lowest-highest)",
            "billable saved: mean (lowest-highest)",
            "AUC lost [95 % interval]",
            "goal",
        ]
    ]
    results: dict[str, Any] = {}
    for name in names:
        saved = [
            1 - run["billable_seconds"] / full["billable_seconds"]
            for run, full in zip(runs[name], runs[FULL], strict=True)
        ]
        lost = paired_interval(
            np.array(
                [
                    full["best_validation_auc"] - run["best_validation_auc"]
                    for run, full in zip(runs[name], runs[FULL], strict=True)
                ]
            ),
            rng,
        )
        trials = [run["trials"] for run in runs[name]]
        met = statistics.fmean(saved) >= GOAL_SAVED and lost["mean"] <= GOAL_LOST
        results[name] = {"saved": statistics.fmean(saved), "auc_lost": lost, "goal_met": met}
        rows.append(
            [
                name,
                f"{statistics.fmean(trials):.1f} ({min(trials)}-{max(trials)})",
                f"{statistics.fmean(saved):.1%} ({min(saved):.0%}-{max(saved):.0%})",
                f"{lost['mean']:+.4f} [{lost['low']:+.4f}, {lost['high']:+.4f}]",
                "" if name == FULL else "met" if met else "not met",
            ]
        )
    write(
        "tuning_reference_completion",
        "Completion rules on the reference's tuning job: billable seconds saved, AUC lost",
        {"settings": vars(args), "results": results, "runs": runs},
        rows,
        f"""
Seeds 0..{args.seeds - 1}; on each, every run in an order that turns with the seed. "billable
saved": 1 - the run's billable worker-seconds over the no-rule run's on the same seed (mean
over seeds, lowest-highest). "AUC lost": the no-rule run's best validation AUC minus the
run's, paired by seed, with a bootstrap interval (real runs: two no-rule runs of one seed
differ too, so small losses either way are noise). min_improvement_per_cost is in AUC per
billable worker-hour. The goal, in LCBench's terms: at least {GOAL_SAVED:.0%} saved at no more
than 0.1 points ({GOAL_LOST} AUC) lost. Every trial uses 3 workers; the 2-core machine runs up
to {args.parallel * 3} worker processes at once.
""",
    )


if __name__ == "__main__":
    main()
