"""Why scaletune's model-based proposals lost to random ones on LCBench, and what Syne Tune's
BOHB does differently (issue 16): the model, with the data, scheduler and loop held fixed.

Every arm runs scaletune's tuning loop with its default scheduler (one bracket of
asynchronous successive halving, stopping type) on the harness of `tuning_lcbench_all.md`
(same tasks, budget, start-up cost and per-(task, seed) random streams), and learns from every
trial's latest report, running trials included, as Syne Tune's BOHB does. Only the model
that turns those values into proposals changes:

- TPE, independent per hyperparameter (`hyperband.searcher = "LastValueTPE"`);
- TPE, multivariate (Optuna's joint form, which scaletune's other TPE searchers use);
- Syne Tune's KDE, as its BOHB runs it (each range scaled linearly to [0, 1], log ranges too);
- Syne Tune's KDE on each range's own scale (log ranges in log space).

The random arm (scaletune's default, `ASHA`), `LastValueTPE ASHA` and Syne Tune's own BOHB
are the committed runs of `tuning_lcbench_all.json` on the same streams, not rerun.

The committed results were made while LastValueTPE drew Optuna's 24 TPE candidates a
proposal (before commit 9b246d6, which made it 8; `benchmarks.tuning.candidates`): run
again, both TPE arms and the committed LastValueTPE runs draw 8.

    PYTHONPATH=. .bench-venv/bin/python -m benchmarks.tuning.searcher_model --seeds 5

Writes benchmarks/results/tuning_searcher_model.{json,md}."""

from __future__ import annotations

import argparse
import json
import math
import multiprocessing
import shlex
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any
from unittest import mock

import numpy as np

from benchmarks._report import RESULTS
from benchmarks.tuning._lcbench_results import at
from benchmarks.tuning._optuna_lastvalue import OptunaLastValueSearcher
from benchmarks.tuning._problem import ALL_TASKS, SPACE, stream_seed, streams_sentence
from benchmarks.tuning._problem import COMMITTED as COMMITTED_SETTING
from scaletune.spec import ObjectiveType, Range
from scaletune.tuning._lastvalue import LastValueSearcher
from scaletune.tuning._searchers import Config, to_samples

CHECKPOINTS = (0.25, 0.5, 1.0)
COMMITTED = RESULTS / "tuning_lcbench_all.json"
BASELINE = "ASHA"  # random proposals (the default before LastValueTPE)
KEPT = (BASELINE, "LastValueTPE ASHA", "Syne Tune BOHB")
ARMS = {
    "TPE multivariate, last values": "multivariate",
    "Syne Tune KDE, last values (linear scale)": "kde-linear",
    "Syne Tune KDE, last values (each range's scale)": "kde-own-scale",
}


class SyneKDESearcher(LastValueSearcher):
    """Syne Tune's KernelDensityEstimator (its BOHB's model) fed every trial's latest value;
    it draws at random itself (a third of proposals, and until it can fit two densities)."""

    def __init__(
        self, ranges: Mapping[str, Range], seed: int, *, own_scale: bool, first: Sequence[Config]
    ) -> None:
        super().__init__(ranges, ObjectiveType.MAXIMIZE, seed, random_fraction=0.0, first=first)
        from benchmarks.tuning._peers import syne_space

        np.random.seed(seed)  # Syne Tune's random draws use numpy's global generator
        self._rng = np.random.default_rng([seed, 4])
        self._own_scale = own_scale
        self._space = syne_space()
        if own_scale:
            from syne_tune.config_space import uniform

            self._space = {name: uniform(0.0, 1.0) for name in SPACE}

    def _ask_model(self) -> dict[str, object]:
        from syne_tune.optimizer.schedulers.searchers.kde.kde_searcher import (
            KernelDensityEstimator,
        )

        kde = KernelDensityEstimator(
            config_space=self._space, random_seed=int(self._rng.integers(2**31))
        )
        for number, (config, value) in enumerate(self._configurations()):
            features = _to_unit(config) if self._own_scale else config
            kde.on_trial_complete(trial_id=number, config=features, metric=-value)  # minimises
        proposal = kde.suggest()
        config = _from_unit(proposal) if self._own_scale else _clipped(proposal)
        return to_samples(self._ranges, config)


def _to_unit(config: Config) -> dict[str, float]:
    unit = {}
    for name, (low, high, _, log) in SPACE.items():
        value = float(config[name])  # type: ignore[arg-type]
        if log:
            unit[name] = (math.log(value) - math.log(low)) / (math.log(high) - math.log(low))
        else:
            unit[name] = (value - low) / (high - low)
    return unit


def _from_unit(unit: Mapping[str, Any]) -> Config:
    config: Config = {}
    for name, (low, high, integer, log) in SPACE.items():
        u = min(max(float(unit[name]), 0.0), 1.0)
        if log:
            value = math.exp(math.log(low) + u * (math.log(high) - math.log(low)))
        else:
            value = low + u * (high - low)
        value = min(max(value, low), high)
        config[name] = round(value) if integer else value
    return config


def _clipped(config: Mapping[str, Any]) -> Config:
    """Syne Tune 0.16's KDE can propose log-integers below their range: the nearest bound, as
    the harness does for its BOHB."""
    return {
        name: type(config[name])(min(max(config[name], low), high))
        for name, (low, high, _, _) in SPACE.items()
    }


@contextmanager
def _searcher_of(arm: str) -> Iterator[None]:
    """The tuning loop's searcher for this arm; the scheduler stays the spec's."""
    from scaletune.tuning._strategy import Search, make_search

    def patched(spec: Any, **options: Any) -> Any:
        scheduler = make_search(spec, **options).scheduler
        kind = ARMS[arm]
        searcher: LastValueSearcher
        if kind == "multivariate":
            searcher = OptunaLastValueSearcher.for_spec(spec, {"multivariate": True})
        else:
            searcher = SyneKDESearcher(
                spec.ranges, spec.seed, own_scale=kind == "kde-own-scale", first=()
            )
        return Search(searcher, scheduler)

    with mock.patch("scaletune.tuning._tuner.make_search", patched):
        yield


def _one(job: tuple[str, str, int]) -> dict[str, Any]:
    from benchmarks.tuning import run

    arm, task, seed = job
    with _searcher_of(arm):
        # the default's spec, this arm's searcher
        record = run._one(("ASHA", task, seed, COMMITTED_SETTING.name))
    return {**record, "method": arm}


def summarize(runs: list[dict[str, Any]], everything: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean regret of each arm (against the best any committed or new run found on the task)
    and its paired bootstrap interval against random proposals."""
    best: dict[str, float] = {}
    for run in everything:
        best[run["task"]] = max(best.get(run["task"], -math.inf), at(run, 1.0))
    by = {(run["method"], run["task"], run["seed"]): run for run in runs}
    pairs = sorted({(run["task"], run["seed"]) for run in runs if run["method"] == BASELINE})
    resample = np.random.default_rng(0).integers(0, len(pairs), (4000, len(pairs)))
    arms: dict[str, Any] = {}
    for arm in (*KEPT, *ARMS):
        entry: dict[str, Any] = {}
        for fraction in CHECKPOINTS:
            regret = np.array([best[t] - at(by[(arm, t, s)], fraction) for t, s in pairs])
            base = np.array([best[t] - at(by[(BASELINE, t, s)], fraction) for t, s in pairs])
            difference = regret - base
            low, high = np.percentile(difference[resample].mean(axis=1), [2.5, 97.5])
            entry[str(fraction)] = {
                "mean_regret": float(regret.mean()),
                "minus_random": float(difference.mean()),
                "low": float(low),
                "high": float(high),
            }
        entry["median_reports"] = float(np.median([by[(arm, t, s)]["reports"] for t, s in pairs]))
        arms[arm] = entry
    return {"pairs": len(pairs), "arms": arms}


def write(
    runs: list[dict[str, Any]], everything: list[dict[str, Any]], command: str, made: str
) -> None:
    summary = summarize(runs, everything)
    (RESULTS / "tuning_searcher_model.json").write_text(
        json.dumps({"command": command, "made": made, "summary": summary, "runs": runs}, indent=1)
        + "\n"
    )
    lines = [
        "# The model behind last-value proposals on LCBench: TPE or Syne Tune's KDE",
        "",
        f"Command: `{command}` (from the repository root, in `.bench-venv`; {made}).",
        f"All 34 LCBench tasks; {summary['pairs']} (task, seed) pairs. scaletune's tuning loop "
        "and default scheduler (one bracket of asynchronous successive halving) for every arm; "
        "each learns from every trial's latest report, running trials included; only the "
        "model differs. `ASHA` (random), `LastValueTPE ASHA` and Syne Tune BOHB are the "
        "committed runs of `tuning_lcbench_all.json` on the same streams. Regret: the best "
        "validation accuracy (%) any run found on the task minus this run's best by then. "
        + streams_sentence(runs),
        "",
        "| proposals | regret at 25 % | 50 % | 100 % | minus random at 25 % [95 % interval] "
        "| at 50 % | at 100 % | median reports a run |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for arm, entry in summary["arms"].items():
        cells = [f"{entry[str(f)]['mean_regret']:.3f}" for f in CHECKPOINTS]
        differences = [
            ""
            if arm == BASELINE
            else f"{entry[str(f)]['minus_random']:+.3f} "
            f"[{entry[str(f)]['low']:+.3f}, {entry[str(f)]['high']:+.3f}]"
            for f in CHECKPOINTS
        ]
        name = {BASELINE: "random (scaletune's default, ASHA)"}.get(arm, arm)
        lines.append(
            f"| {name} | {' | '.join(cells)} | {' | '.join(differences)} "
            f"| {entry['median_reports']:.0f} |"
        )
    (RESULTS / "tuning_searcher_model.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--processes", type=int, default=2)
    args = parser.parse_args()
    committed = json.loads(COMMITTED.read_text())
    kept = [
        run
        for run in committed["runs"]
        if run["method"] in KEPT
        and run["seed"] < args.seeds
        and run.get("stream_seed") == stream_seed(run["task"], run["seed"])
    ]
    jobs = [(arm, task, seed) for task in ALL_TASKS for seed in range(args.seeds) for arm in ARMS]
    started = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(args.processes) as pool:
        new = pool.map(_one, jobs, chunksize=2)
    minutes = (time.perf_counter() - started) / 60
    command = "python -m benchmarks.tuning.searcher_model " + shlex.join(sys.argv[1:])
    made = f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {minutes:.0f} min"
    write(kept + new, committed["runs"] + new, command, made)
    print((RESULTS / "tuning_searcher_model.md").read_text())


if __name__ == "__main__":
    main()
