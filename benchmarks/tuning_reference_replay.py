"""Why Hyperband trails the full search on the reference's tuning job (issue 16): the same
30 configurations, judged at different first rungs, on the curves real runs recorded.

For each seed, the reference's tuning job runs once for real with random proposals and no
early stopping (3-worker XGBoost on bank marketing, the 7 ranges, 30 jobs, 4 in parallel: the
benchmark's "(c)"). Every Hyperband variant is then replayed on the curves it recorded
(`ReplaySource`, the same seed, so the same 30 configurations in the same order): which trials
each stops, the best validation AUC it finds and the billable worker-seconds it spends, against
the full search replayed the same way. With a fixed number of jobs, Hyperband can at best tie
the full search, and ties only if it never stops the configuration that wins at the end.

    .venv/bin/python -m benchmarks.tuning_reference_replay            # 3 seeds

Writes benchmarks/results/tuning_reference_replay.{json,md}.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import tomllib
from pathlib import Path
from typing import Any

from benchmarks._report import write
from benchmarks.tuning_reference import EXAMPLE, run_reference_job
from scaletune.api import Session
from scaletune.simulation import ReplaySource, simulate_tuning
from scaletune.spec import TuningJobSpec
from scaletune.store import Store
from scaletune.tuning import summarize

FULL = "no early stopping (replayed)"
# Each variant's [hyperband] settings over the example's (min_resource 1, max_resource 200,
# eta 3); the first is what the reference job gets from the example and scaletune's defaults,
# but for its proposals: a replay judges only the recorded (random) configurations, so every
# variant proposes as the full search did (`_replayed`).
VARIANTS: dict[str, dict[str, Any]] = {
    "one bracket, first rung at round 1 (the default job)": {"min_resource": 1},
    "one bracket, first rung at round 3": {"min_resource": 3},
    "one bracket, first rung at round 5": {"min_resource": 5},
    "one bracket, first rung at round 7": {"min_resource": 7},
    "one bracket, first rung at round 10": {"min_resource": 10},
    "one bracket, first rung at round 20": {"min_resource": 20},
    "one bracket, round 1, pausing": {"min_resource": 1, "type": "promotion"},
    "two brackets, round 1": {"min_resource": 1, "brackets": 2},
    "all 5 brackets, round 1": {"min_resource": 1, "brackets": None},
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--max-jobs", type=int, default=30)
    parser.add_argument("--parallel", type=int, default=4)
    args = parser.parse_args()
    runs: dict[str, list[dict[str, Any]]] = {}
    recorded_aucs: list[float] = []
    winner_ranks: list[dict[int, int]] = []  # per seed: round -> the winner's rank there
    with tempfile.TemporaryDirectory() as scratch:
        folder = Path(scratch)
        with Session(folder / "store.db") as session:
            session.backend.prestart(args.parallel * 3)
            recorded = [_full_search(session, seed, args) for seed in range(args.seeds)]
        with Store(f"sqlite:///{folder / 'store.db'}") as store:
            for seed, tuning_id in enumerate(recorded):
                recorded_aucs.append(summarize(store, tuning_id).to_json_dict()["best_objective"])
                winner_ranks.append(_winner_ranks(store, tuning_id))
                replay = ReplaySource.from_store(store, tuning_id)
                full = _replayed(replay, None, folder / f"{seed}-full.db")
                for index, (name, hyperband) in enumerate({FULL: None, **VARIANTS}.items()):
                    result = (
                        full
                        if hyperband is None
                        else _replayed(replay, hyperband, folder / f"{seed}-{index}.db")
                    )
                    runs.setdefault(name, []).append(
                        {
                            "seed": seed,
                            **result,
                            "full_auc": full["auc"],
                            "cost_ratio": result["billable"] / full["billable"],
                            "ties_full": result["auc"] >= full["auc"] - 1e-12,
                        }
                    )
    rows = [["run", "best validation AUC", "minus the full search", "cost / full", "ties"]]
    results: dict[str, Any] = {}
    for name, entries in runs.items():
        aucs = [entry["auc"] for entry in entries]
        gaps = [entry["auc"] - entry["full_auc"] for entry in entries]
        ratios = [entry["cost_ratio"] for entry in entries]
        results[name] = {
            "auc": statistics.fmean(aucs),
            "auc_by_seed": aucs,
            "minus_full": statistics.fmean(gaps),
            "cost_ratio": statistics.fmean(ratios),
            "ties": sum(entry["ties_full"] for entry in entries),
        }
        rows.append(
            [
                name,
                " / ".join(f"{auc:.4f}" for auc in aucs) + f" (mean {statistics.fmean(aucs):.4f})",
                f"{statistics.fmean(gaps):+.4f}",
                f"{statistics.fmean(ratios):.2f}",
                f"{results[name]['ties']} of {len(entries)}",
            ]
        )
    write(
        "tuning_reference_replay",
        "The reference's tuning job replayed: where Hyperband's first rung costs the winner",
        {"settings": vars(args), "results": results, "runs": runs, "winner_ranks": winner_ranks},
        rows,
        f"""
Seeds 0..{args.seeds - 1}; each column of AUCs is one seed. The full search for real found
{" / ".join(f"{auc:.4f}" for auc in recorded_aucs)}; replayed, the same (the first row), so
the replay keeps every trial's curve. "cost / full": billable worker-seconds of the variant
over the full search's, both replayed, per seed, then the mean. "ties": the seeds on which the
variant found the full search's best AUC (it kept the winning configuration to its end).
Hyperband's resource is the boosting round (max_resource 200, eta 3); one bracket and the
stopping type are scaletune's defaults. Every variant proposes the recorded random
configurations (the default proposes with LastValueTPE, whose configurations a replay cannot
judge: they were never run; `tuning_reference_searchers.md` runs it for real). The issue's goal
for the default: no lower AUC than the full search at <= 0.25x its cost.

The full search's winner (the best final AUC) ranked among the {args.max_jobs} configurations
by AUC at each round (1 = best; one bracket with eta 3 keeps the top third at each rung):

{_ranks_table(winner_ranks)}
""",
    )


def _full_search(session: Session, seed: int, args: argparse.Namespace) -> str:
    return run_reference_job(session, seed, args, ["strategy=Random"], hyperband=False)


RANK_ROUNDS = (1, 3, 9, 20, 27, 81)


def _winner_ranks(store: Store, tuning_id: str) -> dict[int, int]:
    """The rank, by AUC at each of RANK_ROUNDS, of the trial with the best final AUC."""
    metric = TuningJobSpec.model_validate(store.get_tuning_job(tuning_id).spec).objective_metric
    curves = [
        {point.step: point.value for point in store.metrics(trial.id, metric)}
        for trial in store.training_jobs_of(tuning_id)
    ]
    winner = max((curve for curve in curves if curve), key=lambda curve: curve[max(curve)])
    return {
        step: 1 + sum(curve.get(step, float("-inf")) > winner[step] for curve in curves)
        for step in RANK_ROUNDS
        if step in winner
    }


def _ranks_table(winner_ranks: list[dict[int, int]]) -> str:
    lines = ["| seed | " + " | ".join(f"round {step}" for step in RANK_ROUNDS) + " |"]
    lines.append("|---|" + "---|" * len(RANK_ROUNDS))
    for seed, ranks in enumerate(winner_ranks):
        cells = [str(ranks.get(step, "-")) for step in RANK_ROUNDS]
        lines.append(f"| {seed} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _replayed(replay: ReplaySource, hyperband: dict[str, Any] | None, path: Path) -> dict[str, Any]:
    """The recorded job under another strategy, simulated: its best AUC and billable seconds."""
    raw = replay.spec.model_dump(mode="json")
    if hyperband is not None:
        raw["strategy"] = "Hyperband"
        example = tomllib.loads(EXAMPLE.read_text())["hyperband"]
        raw["hyperband"] = {**example, "searcher": "Random", **hyperband}
    with Store(f"sqlite:///{path}") as store:
        record = simulate_tuning(TuningJobSpec.model_validate(raw), replay, store)
        summary = summarize(store, record.id).to_json_dict()
    return {"auc": summary["best_objective"], "billable": summary["billable_seconds"]}


if __name__ == "__main__":
    main()
