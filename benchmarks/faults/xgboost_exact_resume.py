"""What resuming a sampled XGBoost job exactly costs, and that it is exact.

XGBoost keeps its column sampler's random state outside its model files, so a run resumed
from a checkpoint draws other columns than an uninterrupted one. scaletune rebuilds the tree
updaters (and with them the samplers) every `sampler_period` rounds and checkpoints on those
rounds. This measures, on the reference's bank marketing job (its hyperparameters: columns
sampled 0.8 per tree and 0.5 per level; 150 rounds), side by side in one process:

- XGBoost's own loop (nothing rebuilt): what a sampled job cost before;
- rebuilt every 10 rounds (scaletune's period with checkpoints by time, the default);
- rebuilt every round (the worst period, when `every_steps` has no divisor from 2 to 10).

Each at two sizes: the whole training set on every core, and one third of it on one thread
(what each of 3 workers trains on this 2-core machine). A run is the CPU time of its 150
`Booster.update` calls; runs rotate their order; the cost is the ratio of medians against
XGBoost's loop. Then each setting is trained to round 70, saved, resumed from the saved model
in a new booster and trained to 150: the largest difference of its validation predictions from
the uninterrupted run's says whether the resume is exact.

Last, what it costs a real job: the reference's 3-worker job run by scaletune (samplers rebuilt
every 10 rounds) and by the same program with the rebuilding left out, alternating, wall time
as the job record has it.
"""

from __future__ import annotations

import argparse
import dataclasses
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import xgboost as xgb
from sklearn.metrics import roc_auc_score

from benchmarks._programs import xgboost_samplers_kept
from benchmarks._report import BANK_MARKETING_FILE, Paired, spread, write
from scaletune.algorithms.xgboost import (
    REFERENCE_HYPERPARAMETERS,
    XGBoostAlgorithm,
    XGBoostHyperparameters,
)
from scaletune.algorithms.xgboost._program import _fresh_samplers
from scaletune.api import Session
from scaletune.data import prepare_bank_marketing
from scaletune.spec import training_spec_from_dict
from scaletune.worker import WorkerProgram

SETTINGS = {"XGBoost's loop": None, "rebuilt every 10 rounds": 10, "rebuilt every round": 1}
RESUME_AT = 70


def _train(
    params: dict[str, Any], dtrain: xgb.DMatrix, period: int | None, rounds: range, model: Any
) -> xgb.Booster:
    booster = xgb.Booster(params, [dtrain], model_file=model)
    for round_index in rounds:
        if period is not None and round_index > rounds.start and round_index % period == 0:
            _fresh_samplers(booster)  # the very call scaletune's workers make
        booster.update(dtrain, iteration=round_index)
    return booster


def _timed(params: dict[str, Any], dtrain: xgb.DMatrix, period: int | None, rounds: int) -> float:
    """CPU seconds of this process (XGBoost's threads included): on a shared machine, less
    moved than wall time by other programs taking the cores."""
    started = time.process_time()
    _train(params, dtrain, period, range(rounds), None)
    return time.process_time() - started


def _resume_error(
    params: dict[str, Any], dtrain: xgb.DMatrix, valid: xgb.DMatrix, period: int | None, rounds: int
) -> tuple[float, float, float]:
    """Largest |prediction difference| of a run resumed at RESUME_AT from the uninterrupted
    one, and both validation AUCs."""
    whole = _train(params, dtrain, period, range(rounds), None)
    first = _train(params, dtrain, period, range(RESUME_AT), None)
    saved = bytearray(first.save_raw("ubj"))
    resumed = _train(params, dtrain, period, range(RESUME_AT, rounds), saved)
    a, b = whole.predict(valid), resumed.predict(valid)
    labels = valid.get_label()
    return float(np.abs(a - b).max()), roc_auc_score(labels, a), roc_auc_score(labels, b)


class _SamplersKept(XGBoostAlgorithm):
    @property
    def program(self) -> WorkerProgram:
        return xgboost_samplers_kept


def _job_seconds(session: Session, data: Path, kept: bool) -> float:
    channel = {"dataset": "bank-marketing", "dataset_file": str(data)}
    spec = training_spec_from_dict(
        {
            "algorithm": "xgboost",
            "instance_count": 3,
            "hyperparameters": REFERENCE_HYPERPARAMETERS,
            "channels": {"train": channel, "validation": channel},
        }
    )
    job = session.controller.prepare(spec)
    if kept:
        job = dataclasses.replace(job, algorithm=_SamplersKept())
    record = session.controller.run(job)
    assert record.status.value == "Completed", record.failure_reason
    return float(record.wall_seconds or 0.0)


def _jobs(data: Path, repeats: int) -> Paired:
    """Wall seconds of the 3-worker job: samplers kept (XGBoost's loop) vs scaletune's."""
    kept: list[float] = []
    ours: list[float] = []
    with tempfile.TemporaryDirectory() as scratch, Session(Path(scratch) / "store.db") as session:
        session.backend.prestart(3)
        _job_seconds(session, data, kept=True)  # warm-up: imports, the data's first read
        for repeat in range(repeats):
            order = (True, False) if repeat % 2 == 0 else (False, True)
            for samplers_kept in order:
                (kept if samplers_kept else ours).append(_job_seconds(session, data, samplers_kept))
    return Paired.of(kept, ours)


def _ratios(pairs: dict[str, float]) -> str:
    return f"{pairs['median']:.3f} ({pairs['min']:.3f}–{pairs['max']:.3f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--data", type=Path, default=BANK_MARKETING_FILE)
    args = parser.parse_args()
    tables = prepare_bank_marketing(args.data)
    train, validation = tables["train"], tables["validation"]
    reference = XGBoostHyperparameters.model_validate(REFERENCE_HYPERPARAMETERS)
    rounds = reference.num_round
    third = np.arange(len(train.labels)) % 3 == 0
    sizes = {
        "all rows, 2 threads": (train.features, train.labels, 2),
        "a third of the rows, 1 thread": (train.features[third], train.labels[third], 1),
    }
    valid = xgb.DMatrix(validation.features, label=validation.labels)
    results: dict[str, Any] = {}
    rows = [
        [
            "training set",
            "samplers",
            "s per 150 rounds (CPU; job: wall): median (min–max)",
            "vs XGBoost's loop",
            "paired ratios: median (min–max)",
            "resumed at 70: max |Δ prediction|",
            "validation AUC (uninterrupted / resumed)",
        ]
    ]
    labels = list(SETTINGS)
    for size, (features, targets, threads) in sizes.items():
        params = reference.booster_params(seed=0, nthread=threads)
        dtrain = xgb.DMatrix(features, label=targets, nthread=threads)
        _timed(params, dtrain, None, rounds)  # warm-up: the quantile sketch, the caches
        times: dict[str, list[float]] = {label: [] for label in labels}
        for repeat in range(args.repeats):
            turn = repeat % len(labels)  # rotated, so no setting always runs first
            for label in labels[turn:] + labels[:turn]:
                times[label].append(_timed(params, dtrain, SETTINGS[label], rounds))
        results[size] = {"rows": len(targets), "nthread": threads, "seconds": times}
        for label, period in SETTINGS.items():
            compared = Paired.of(times[labels[0]], times[label])
            error, auc_whole, auc_resumed = _resume_error(params, dtrain, valid, period, rounds)
            results[size][label] = {
                **compared.results(),
                "resume_max_abs_prediction_difference": error,
                "validation_auc": {"uninterrupted": auc_whole, "resumed": auc_resumed},
            }
            first = label == labels[0]
            rows.append(
                [
                    f"{size} ({len(targets):,})",
                    label,
                    spread(compared.ours),
                    "1.00" if first else f"{compared.ratio:.3f}",
                    "" if first else _ratios(compared.pairs),
                    f"{error:.3g}",
                    f"{auc_whole:.6f} / {auc_resumed:.6f}",
                ]
            )
    job = _jobs(args.data, args.repeats)
    results["job"] = job.results()
    for label, stats, ratio in (
        ("XGBoost's loop", job.plain, "1.00"),
        ("rebuilt every 10 rounds", job.ours, f"{job.ratio:.3f}"),
    ):
        rows.append(
            [
                "the reference's job: 3 workers, wall s",
                label,
                spread(stats),
                ratio,
                "" if ratio == "1.00" else _ratios(job.pairs),
                "",
                "",
            ]
        )
    write(
        "xgboost_exact_resume",
        "Resuming sampled XGBoost exactly: what rebuilding its samplers costs",
        results,
        rows,
        f"""
{args.repeats} runs of each setting per training set, in rotating order, in one process;
{rounds} rounds of the reference's hyperparameters (hist, depth 6, columns sampled 0.8 per
tree and 0.5 per level), `seed_per_iteration` on in all (scaletune sets it so that rows are
drawn from the seed and the round). "Rebuilt" is `Booster.load_config(save_config())`, which
makes XGBoost build its tree updaters anew; a new updater draws its column sampler's seed from
that round's random state, as the updater of a resumed booster does. Only then is a run resumed
at a rebuilt round (70 is one for periods 10 and 1) the uninterrupted run to the last bit; with
XGBoost's loop the resumed run draws other columns and ends at another AUC. The paired ratios'
spread is this shared machine's noise. The last two rows time whole jobs (a job's wall time,
workers warm): the per-process rows above exaggerate the share, since a distributed round also
waits on its all-reduce and evaluation.
""",
    )


if __name__ == "__main__":
    main()
