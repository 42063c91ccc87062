"""What ranking by forecast costs Hyperband's scheduler, at 1,000 to 100,000 trials.

The scheduler alone (no store, no tuning loop): N trials of the synthetic scale job's curves
(benchmarks/scale/_synthetic.py: 27 reports each, rungs at 1, 3 and 9, eta 3), reported one
trial after another, to a scheduler whose rungs rank values and to one whose rungs rank pow3
forecasts (a forecast at every rung a trial reaches with 4 reports or more). The two run
back to back, alternating which goes first, `--repeats` times per size; reported: the median
microseconds per report, the rung decisions made, and the ratio of the two schedulers' times
(forecast over value) with the range of the ratios within back-to-back pairs. (Memory: a
forecasting scheduler holds the curves of running trials only, each dropped at the trial's
last rung or end: tests/tuning/test_hyperband.py.)

    .venv/bin/python -m benchmarks.tuning.forecast_cost                 # 1k, 10k, 100k

Writes benchmarks/results/hyperband_forecast_cost.{json,md}.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks._report import Paired, spread, summary, write
from benchmarks.scale._synthetic import MAX_RESOURCE, SyntheticCurves
from scaletune.spec import ObjectiveType, RankBy
from scaletune.tuning import Decision, hyperband_scheduler

RANKINGS: tuple[RankBy, RankBy] = ("value", "forecast")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.repeats < 1 or min(args.sizes) < 1:
        parser.error(f"--repeats {args.repeats} --sizes {args.sizes}: need 1 or more")
    rows = [["trials", "rungs rank", "µs a report: median (range)", "rung decisions", "time ratio"]]
    results: dict[str, Any] = {}
    for size in args.sizes:
        curves = _curves(size)
        seconds: dict[str, list[float]] = {ranked: [] for ranked in RANKINGS}
        decisions: dict[str, int] = {}
        for repeat in range(args.repeats):
            for ranked in RANKINGS if repeat % 2 == 0 else reversed(RANKINGS):
                took, decisions[ranked] = _run(curves, ranked)
                seconds[ranked].append(took)
        reports = sum(len(curve) for curve in curves)
        paired = Paired.of(seconds["value"], seconds["forecast"])
        ratio = f"{paired.ratio:.2f} ({paired.pairs['min']:.2f}-{paired.pairs['max']:.2f})"
        results[str(size)] = {
            "reports": reports,
            "rung_decisions": decisions,
            **paired.results(),
        }
        for ranked in RANKINGS:
            per_report = summary([s / reports for s in seconds[ranked]])
            rows.append(
                [
                    f"{size:,}",
                    ranked,
                    spread(per_report, scale=1e6),
                    f"{decisions[ranked]:,}",
                    "" if ranked == "value" else ratio,
                ]
            )
    write(
        "hyperband_forecast_cost",
        "What ranking by forecast costs Hyperband's scheduler",
        {"settings": vars(args), "results": results},
        rows,
        f"""
Each trial reports steps 1..{MAX_RESOURCE}, one trial after another, until it is stopped.
"rung decisions": the values the rungs recorded and ranked (a forecast rung judges nothing
before a trial's 4th report: rungs 1 and 3 decide nothing there, fewer trials are stopped
early, and more reach rung 9). "ratio": the forecasting scheduler's seconds over
the value-ranking one's, medians over {args.repeats} back-to-back pairs (in brackets the
lowest and highest ratio within a pair). A pair sees the same curves; the forecasting one
sees more reports only where it stops fewer trials, and each is timed over all it sees.
""",
    )


def _curves(size: int) -> list[list[float]]:
    """Each trial's AUC at steps 1..MAX_RESOURCE, from the scale job's curves and its own
    random configurations (what Random would propose; the same for both schedulers)."""
    import numpy as np

    rng = np.random.default_rng(0)
    source = SyntheticCurves()
    curves = []
    for _ in range(size):
        config = {
            "eta": float(rng.uniform(0.01, 1.0)),
            "max_depth": int(rng.integers(1, 11)),
            "min_child_weight": float(rng.uniform(1, 10)),
        }
        curve = source.curve(config, instance_count=2)
        curves.append([point.metrics["validation:auc"] for point in curve.points])
    return curves


def _run(curves: list[list[float]], ranked: RankBy) -> tuple[float, int]:
    """Seconds to feed every report, and the rung decisions made."""
    scheduler = hyperband_scheduler(
        ObjectiveType.MAXIMIZE,
        min_resource=1,
        max_resource=MAX_RESOURCE,
        eta=3,
        seed=0,
        brackets=1,
        rank_by=ranked,
    )
    started = time.perf_counter()
    for trial, curve in enumerate(curves):
        for step, value in enumerate(curve, start=1):
            if scheduler.on_report(trial, step, value).decision is not Decision.CONTINUE:
                break
        scheduler.on_end(trial)
    took = time.perf_counter() - started
    return took, sum(len(values) for values in scheduler.brackets[0].recorded.values())


if __name__ == "__main__":
    main()
