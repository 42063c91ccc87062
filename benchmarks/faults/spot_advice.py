"""How close `scaletune advise`'s spot simulation comes to what runs under a trace cost.

For each job: it runs on 4 workers uninterrupted, and as probes on 3 and 2 (its measured step
times and time outside steps: the advice's basis); then elastic (2 to 4 workers) under a spot
trace twice, all on spot capacity and mixed (its 2 fewest on-demand), acting on the notices.
The advice's simulation of the same trace, from the measured runs alone, predicts each run's
wall time and cost; the table compares them. Cost: on-demand worker-seconds plus spot ones at
0.3 of their price."""

from __future__ import annotations

import argparse
import functools
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._report import BANK_MARKETING_FILE, MNIST_FOLDER, write
from benchmarks.faults.elastic_preemption import dnn_job, xgboost_job
from benchmarks.faults.spot_notices import Notice, SpotTrace, run_under
from scaletune.advice import (
    JobShape,
    Mix,
    Preemption,
    StepTimeModel,
    measure_run,
    simulate,
    start_seconds,
)
from scaletune.api import Session
from scaletune.cluster import LocalBackend, SlotsFile
from scaletune.store import TrainingJobRecord

SPOT_PRICE = 0.3
CHECKPOINT_SECONDS = 10.0


def _cost(record: TrainingJobRecord) -> float:
    billed = record.billable_by_class or {}
    return billed.get("on-demand", 0.0) + SPOT_PRICE * billed.get("spot", 0.0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--dnn-epochs", type=int, default=20)
    parser.add_argument("--xgboost-rounds", type=int, default=4000)
    parser.add_argument("--notices", type=float, nargs=2, default=[10.0, 20.0])
    parser.add_argument("--first-notice", type=float, default=12.0)
    parser.add_argument("--second-notice", type=float, default=30.0)
    parser.add_argument("--back-after", type=float, default=15.0)
    parser.add_argument("--mnist", type=Path, default=MNIST_FOLDER)
    parser.add_argument("--bank", type=Path, default=BANK_MARKETING_FILE)
    args = parser.parse_args()
    # Ranks 3 and 2: spot under both mixes (mixed holds ranks 0 and 1 on-demand).
    notices = [
        Notice(args.first_notice, args.notices[0], 3, args.back_after),
        Notice(args.second_notice, args.notices[1], 2, args.back_after),
    ]
    trace = [Preemption(n.at + n.seconds, n.seconds, n.back_after) for n in notices]
    jobs: dict[str, tuple[Callable[[Any], dict[str, Any]], str]] = {
        "DNN (MNIST MLP)": (
            lambda size: dnn_job(args.mnist, args.dnn_epochs, size, CHECKPOINT_SECONDS),
            "validation:accuracy",
        ),
        "XGBoost (bank marketing)": (
            lambda size: xgboost_job(args.bank, args.xgboost_rounds, size, CHECKPOINT_SECONDS),
            "validation:auc",
        ),
    }
    most, elastic = 4, {"min": 2, "max": 4}
    results: dict[str, Any] = {"trace": [p.__dict__ for p in trace], "jobs": {}}
    rows = [
        [
            "job",
            "mix",
            "measured wall s",
            "predicted wall s",
            "measured cost",
            "predicted cost",
            "cost error",
        ]
    ]
    with tempfile.TemporaryDirectory() as scratch:
        capacity = SlotsFile(Path(scratch) / "slots")
        for name, (make, metric) in jobs.items():
            capacity.write(most)
            backend = LocalBackend(slots=capacity)
            with Session(Path(scratch) / "store.db", backend=backend) as session:
                backend.prestart(most)
                measures, restarts = [], []
                for size in (most, 3, 2):
                    record, _ = run_under(session, make(size), None)
                    series = session.store.metrics(record.id, metric)
                    measures.append(measure_run(record, series, size))
                    attempts = session.store.attempts.of(record.id)
                    restarts.append(start_seconds(attempts, series, measures[-1].step_seconds))
                model = StepTimeModel.fit(measures)
                # The least: the first run of a backend also pays its workers' first imports.
                restart = min(r for r in restarts if r is not None)
                shape = JobShape(
                    measures[0].steps_run, model.at, restart, CHECKPOINT_SECONDS, most, 2
                )
                outcomes: dict[str, Any] = {"basis": model.describe(), "restart": restart}
                for mix, capacity_plan in ((Mix.SPOT, "spot"), (Mix.MIXED, "mixed")):
                    raw = make(elastic)
                    raw["cluster"] = {"capacity": capacity_plan}
                    played = functools.partial(SpotTrace, notices, capacity, most, told=True)
                    record, _ = run_under(session, raw, played)
                    predicted = simulate(shape, mix, trace)
                    measured_cost, predicted_cost = _cost(record), predicted.cost(SPOT_PRICE)
                    error = predicted_cost / measured_cost - 1
                    outcomes[mix.value] = {
                        "status": record.status.value,
                        "wall_seconds": record.wall_seconds,
                        "billable_by_class": record.billable_by_class,
                        "measured_cost": measured_cost,
                        "predicted_wall_seconds": predicted.wall_seconds,
                        "predicted_cost": predicted_cost,
                        "cost_error": error,
                    }
                    rows.append(
                        [
                            name,
                            f"{mix.value} ({record.status.value})",
                            f"{record.wall_seconds:.1f}",
                            f"{predicted.wall_seconds:.1f}",
                            f"{measured_cost:.0f}",
                            f"{predicted_cost:.0f}",
                            f"{100 * error:+.1f} %",
                        ]
                    )
            backend.close()
            results["jobs"][name] = outcomes
    first, second = notices
    write(
        "spot_advice",
        "The spot advice's simulation against runs under a trace",
        results,
        rows,
        f"""
The trace, from the job's first placement: rank {first.rank}'s machine is given a
{first.seconds:g}-s notice at {first.at:g} s, rank {second.rank}'s a {second.seconds:g}-s
notice at {second.at:g} s; each machine goes at its deadline and is back {first.back_after:g}
s later. The runs act on the notices (SIGTERM to the worker); elastic 2 to 4 workers, all on
spot or mixed (ranks 0 and 1 on-demand). The prediction is `scaletune.advice.simulate` of the
same trace from the measured runs alone: step times fitted over 4, 3 and 2 workers, a
restart's time as the measured runs' least from an attempt's start to its first report (less
a step), checkpoints every {CHECKPOINT_SECONDS:g} s. Cost: on-demand
worker-seconds plus spot ones at {SPOT_PRICE:g}. Goal: within 15 %.
""",
    )


if __name__ == "__main__":
    main()
