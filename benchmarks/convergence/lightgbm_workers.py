"""Does distributed LightGBM drift with the worker count, and does a worker lost mid-job cost
any quality?

1. For 1-4 workers, final validation and test AUC on bank marketing: SageMaker's LightGBM
   defaults (no sampling: one run each), and with rows and columns sampled (bagging 0.8 every
   round, feature_fraction 0.8), seeds 0-2; and the defaults with min_data_in_leaf 1, where a
   leaf's row count (exact on one worker, estimated from the hessians on several) all but
   stops mattering. For each, the first tree whose splits or leaf values part from one
   worker's (row counts aside), on the first seed.
2. 3 workers, a checkpoint every 20 rounds, rank 1 killed (SIGKILL) at round 37: the retried
   job against the same job uninterrupted.
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import tempfile
from pathlib import Path
from typing import Any

from benchmarks import _programs
from benchmarks._report import BANK_MARKETING_FILE as BANK
from benchmarks._report import write
from scaletune.algorithms.lightgbm import BANK_MARKETING_HYPERPARAMETERS as DEFAULTS
from scaletune.algorithms.lightgbm import LightGBMAlgorithm
from scaletune.api import Session
from scaletune.spec import training_spec_from_dict
from scaletune.store import TrainingJobRecord
from scaletune.worker import WorkerProgram

SAMPLED = {**DEFAULTS, "bagging_fraction": 0.8, "bagging_freq": 1, "feature_fraction": 0.8}
COUNTS_ASIDE = {**DEFAULTS, "min_data_in_leaf": 1}
COUNT_LINES = ("leaf_count=", "internal_count=")


def _job(
    session: Session,
    workers: int,
    hyperparameters: dict[str, Any],
    seed: int = 0,
    killed: bool = False,
    checkpoint: dict[str, Any] | None = None,
) -> TrainingJobRecord:
    channel = {"dataset": "bank-marketing", "dataset_file": str(BANK)}
    spec = training_spec_from_dict(
        {
            "algorithm": "lightgbm",
            "instance_count": workers,
            "seed": seed,
            "hyperparameters": hyperparameters,
            "channels": {"train": channel, "validation": channel, "test": channel},
            **({} if checkpoint is None else {"checkpoint": checkpoint}),
        }
    )
    job = session.controller.prepare(spec)
    if killed:
        job = dataclasses.replace(job, algorithm=_RankOneKilledAtRound37())
    return session.controller.run(job)


class _RankOneKilledAtRound37(LightGBMAlgorithm):
    @property
    def program(self) -> WorkerProgram:
        return _programs.lightgbm_rank1_killed_at_round_37


def _aucs(record: TrainingJobRecord) -> tuple[float, float]:
    metrics = record.final_metrics
    return metrics["validation:auc"], metrics["test:auc"]


def _tree_text(record: TrainingJobRecord) -> str:
    """The model file's trees, as text (what follows them names parameters and versions)."""
    return Path(record.artifact or "", "lightgbm-model.txt").read_text().split("end of trees")[0]


def _trees(record: TrainingJobRecord) -> list[list[str]]:
    """The model's trees, each as its lines less the row counts."""
    trees = _tree_text(record).split("Tree=")[1:]
    return [
        [line for line in tree.splitlines() if not line.startswith(COUNT_LINES)] for tree in trees
    ]


def _first_parting(one: TrainingJobRecord, others: list[TrainingJobRecord]) -> int | None:
    """The first tree (from 0) in which any of `others` parts from `one`; None: none does."""
    mine = _trees(one)
    parting = [
        next((i for i, (a, b) in enumerate(zip(mine, theirs, strict=True)) if a != b), None)
        for theirs in map(_trees, others)
    ]
    found = [i for i in parting if i is not None]
    return min(found) if found else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3, 4])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    args = parser.parse_args()
    rows = [
        [
            "settings",
            *[f"{n} worker(s)" for n in args.workers],
            "largest gap to 1 worker",
            "first tree parting from 1 worker's",
        ]
    ]
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        for label, hyperparameters, seeds in (
            ("defaults (no sampling)", DEFAULTS, [0]),
            ("bagging 0.8, feature_fraction 0.8", SAMPLED, args.seeds),
            ("min_data_in_leaf 1 (row counts aside)", COUNTS_ASIDE, [0]),
        ):
            jobs = {
                workers: [_job(session, workers, hyperparameters, seed) for seed in seeds]
                for workers in args.workers
            }
            cells = {n: [_aucs(record) for record in records] for n, records in jobs.items()}
            parting = _first_parting(
                jobs[args.workers[0]][0], [records[0] for records in list(jobs.values())[1:]]
            )
            means = {
                n: tuple(statistics.mean(values) for values in zip(*runs, strict=True))
                for n, runs in cells.items()
            }
            one = means[args.workers[0]]
            gap = max(max(abs(v - one[0]), abs(t - one[1])) for v, t in means.values())
            results[label] = {
                "seeds": seeds,
                "aucs": {str(n): runs for n, runs in cells.items()},
                "first_parting_tree": parting,
            }
            rows.append(
                [
                    f"{label}, seeds {seeds}",
                    *[f"{v:.4f} / {t:.4f}" for v, t in means.values()],
                    f"{gap:.4f}",
                    "none" if parting is None else f"tree {parting}",
                ]
            )
        every = {"every_steps": 20, "every_seconds": None}
        plain = _job(session, 3, DEFAULTS, checkpoint=every)
        killed = _job(
            session,
            3,
            DEFAULTS,
            killed=True,
            checkpoint=every,
        )
        attempts = session.store.attempts.of(killed.id)
        trees = [_tree_text(r) for r in (plain, killed)]
        results["killed"] = {
            "uninterrupted": _aucs(plain),
            "retried": _aucs(killed),
            "attempts": [(a.reason, a.checkpoint_step, a.resumed_from_step) for a in attempts],
            "steps_redone": [a.steps_redone for a in attempts],
            "same_trees": trees[0] == trees[1],
        }
    kill_rows = [
        [
            "3 workers, rank 1 killed at round 37",
            "validation / test AUC",
            "attempts",
            "resumed from",
            "same trees",
        ],
        ["uninterrupted", "{:.4f} / {:.4f}".format(*_aucs(plain)), "1", "", ""],
        [
            "killed, retried from its checkpoint",
            "{:.4f} / {:.4f}".format(*_aucs(killed)),
            str(len(attempts)),
            f"round {attempts[-1].resumed_from_step}",
            "yes" if trees[0] == trees[1] else "no",
        ],
    ]
    write(
        "lightgbm_workers",
        "Distributed LightGBM: AUC against the number of workers, and a worker lost mid-job",
        results,
        [
            *rows,
            [""] * len(rows[0]),
            *[row + [""] * (len(rows[0]) - len(row)) for row in kill_rows],
        ],
        """
Cells are final validation AUC / test AUC (means over the seeds); the gap is the largest
difference of either from 1 worker's. Every worker bins the features on the whole training
channel (as one machine does), so the bins do not depend on the shards; 2, 3 and 4 workers
then grow the same trees. One worker trains with LightGBM's serial learner, which counts a
leaf's rows exactly; the data-parallel learner carries each leaf's count as an estimate from
its hessians and checks min_data_in_leaf against it. The trees keep the same splits and leaf
values (their row counts aside) until a split near min_data_in_leaf passes one check and not
the other: the last column. With min_data_in_leaf 1 the count all but stops mattering.
With bagging each rank samples its own shard: other rows from the first tree.
The killed job's retry starts from the checkpoint at round 20 in object storage or the
staging folder; with no sampling it grows the very trees of the uninterrupted job.
""",
    )


if __name__ == "__main__":
    main()
