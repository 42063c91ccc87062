"""The peers, each driven through its own public scheduler/sampler API in `run_policy`:
Optuna (TPE + HyperbandPruner), Ray Tune (ASHA; async HyperBand with 3 brackets), Syne Tune
(ASHA; BOHB; ASHA with a CQR or BORE model per rung) and DEHB (ask/tell). Imported only in
the benchmark environment."""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace
from typing import Any

import numpy as np

from benchmarks.tuning._problem import EPOCHS, METRIC, MIN_RESOURCE, SPACE, random_config

REDUCTION = 3


def optuna_config(trial: Any) -> dict[str, object]:
    """LCBench's seven hyperparameters from an Optuna trial, each on its own scale."""
    config: dict[str, object] = {}
    for name, (low, high, integer, log) in SPACE.items():
        if integer:
            config[name] = trial.suggest_int(name, int(low), int(high), log=log)
        else:
            config[name] = trial.suggest_float(name, low, high, log=log)
    return config


def syne_space() -> dict[str, Any]:
    """LCBench's seven hyperparameters as a Syne Tune configuration space."""
    from syne_tune.config_space import lograndint, loguniform, randint, uniform

    space: dict[str, Any] = {}
    for name, (low, high, integer, log) in SPACE.items():
        if integer:
            space[name] = (lograndint if log else randint)(int(low), int(high))
        else:
            space[name] = (loguniform if log else uniform)(low, high)
    return space


class OptunaPolicy:
    """TPE proposes, HyperbandPruner prunes (report / should_prune at every epoch)."""

    def __init__(self, seed: int) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self._optuna = optuna
        self.study = optuna.create_study(
            direction="maximize",
            sampler=optuna.samplers.TPESampler(seed=seed),
            pruner=optuna.pruners.HyperbandPruner(
                min_resource=MIN_RESOURCE, max_resource=EPOCHS, reduction_factor=REDUCTION
            ),
        )
        self.trials: dict[int, Any] = {}

    def suggest(self) -> tuple[int, dict[str, object]]:
        trial = self.study.ask()
        self.trials[trial.number] = trial
        return trial.number, optuna_config(trial)

    def on_report(self, trial: int, epoch: int, value: float) -> bool:
        handle = self.trials[trial]
        handle.report(value, epoch)
        return not handle.should_prune()

    def on_end(self, trial: int, epoch: int, value: float, stopped: bool) -> None:
        handle = self.trials.pop(trial)
        if stopped and epoch < EPOCHS:
            self.study.tell(handle, state=self._optuna.trial.TrialState.PRUNED)
        else:
            self.study.tell(handle, value)


class RayPolicy:
    """Ray Tune's AsyncHyperBandScheduler (ASHA with 1 bracket, async HyperBand with more) over
    random search; the scheduler alone, as Ray's TuneController calls it."""

    def __init__(self, seed: int, brackets: int) -> None:
        from ray.tune.schedulers import AsyncHyperBandScheduler

        np.random.seed(seed)  # Ray draws each trial's bracket from numpy's global generator
        self.rng = np.random.default_rng(seed)
        self.scheduler = AsyncHyperBandScheduler(
            time_attr="epoch",
            metric=METRIC,
            mode="max",
            max_t=EPOCHS,
            grace_period=MIN_RESOURCE,
            reduction_factor=REDUCTION,
            brackets=brackets,
        )
        self.trials: dict[int, Any] = {}

    def suggest(self) -> tuple[int, dict[str, object]]:
        number = len(self.trials)
        trial = SimpleNamespace(trial_id=f"trial_{number:05d}")
        self.scheduler.on_trial_add(None, trial)
        self.trials[number] = trial
        return number, random_config(self.rng)

    def on_report(self, trial: int, epoch: int, value: float) -> bool:
        from ray.tune.schedulers import TrialScheduler

        action = self.scheduler.on_trial_result(
            None,
            self.trials[trial],
            {"epoch": epoch, METRIC: value},
        )
        return bool(action == TrialScheduler.CONTINUE)

    def on_end(self, trial: int, epoch: int, value: float, stopped: bool) -> None:
        handle = self.trials[trial]
        if stopped:
            self.scheduler.on_trial_remove(None, handle)
        else:
            self.scheduler.on_trial_complete(None, handle, {"epoch": epoch, METRIC: value})


class SynePolicy:
    """Syne Tune's ASHA (random search), BOHB (ASHA with a KDE searcher), ASHA-CQR (conformal
    quantile regression on each rung's results) or ASHA-BORE (density-ratio classification),
    as its Tuner calls them: suggest, on_trial_add, on_trial_result, on_trial_remove /
    on_trial_complete."""

    KINDS = ("ASHA", "BOHB", "ASHA-CQR", "ASHA-BORE")

    def __init__(self, seed: int, kind: str) -> None:
        from syne_tune.backend.trial_status import Trial
        from syne_tune.optimizer.baselines import ASHA, ASHABORE, ASHACQR, BOHB

        np.random.seed(seed)  # its bracket draw, as Ray's
        self._trial_type = Trial
        space = syne_space()
        schedulers = {"ASHA": ASHA, "BOHB": BOHB, "ASHA-CQR": ASHACQR, "ASHA-BORE": ASHABORE}
        scheduler_type = schedulers[kind]
        self.scheduler = scheduler_type(
            space,
            metric=METRIC,
            time_attr="epoch",
            max_t=EPOCHS,
            do_minimize=False,
            random_seed=seed,
            grace_period=MIN_RESOURCE,
            reduction_factor=REDUCTION,
        )
        self.trials: dict[int, Any] = {}
        self.clipped = 0  # proposals outside the space

    def suggest(self) -> tuple[int, dict[str, object]]:
        suggestion = self.scheduler.suggest()
        number = len(self.trials)
        trial = self._trial_type(
            trial_id=number, config=suggestion.config, creation_time=datetime.now()
        )
        self.scheduler.on_trial_add(trial)
        self.trials[number] = trial
        config: dict[str, object] = {}
        for name, (low, high, _, _) in SPACE.items():
            # Syne Tune 0.16's KDE searcher (BOHB) can propose log-integers below their range
            # (max_units=26 of 64..1024): evaluated at the nearest bound, and counted.
            value = suggestion.config[name]
            config[name] = type(value)(min(max(value, low), high))
            self.clipped += config[name] != value
        return number, config

    def on_report(self, trial: int, epoch: int, value: float) -> bool:
        decision = self.scheduler.on_trial_result(
            self.trials[trial], {"epoch": epoch, METRIC: value}
        )
        from syne_tune.optimizer.scheduler import SchedulerDecision

        return bool(decision == SchedulerDecision.CONTINUE)

    def on_end(self, trial: int, epoch: int, value: float, stopped: bool) -> None:
        handle = self.trials[trial]
        if stopped:
            self.scheduler.on_trial_remove(handle)
        else:
            self.scheduler.on_trial_complete(handle, {"epoch": epoch, METRIC: value})


def dehb_space(seed: int) -> Any:
    """LCBench's seven hyperparameters as a ConfigSpace space, each on its own scale."""
    from ConfigSpace import (
        ConfigurationSpace,
        UniformFloatHyperparameter,
        UniformIntegerHyperparameter,
    )

    space = ConfigurationSpace(seed=seed)
    for name, (low, high, integer, log) in SPACE.items():
        if integer:
            hyperparameter: Any = UniformIntegerHyperparameter(name, int(low), int(high), log=log)
        else:
            hyperparameter = UniformFloatHyperparameter(name, low, high, log=log)
        space.add_hyperparameter(hyperparameter)
    return space


def _reductions_between(bottom: int, top: int) -> int:
    """The fewest reductions by REDUCTION from `top` that reach `bottom` or below it."""
    steps = 0
    while bottom * REDUCTION**steps < top:
        steps += 1
    return steps


class DEHBPolicy:
    """DEHB (Awad et al. 2021) through its ask/tell interface: each job is a configuration
    and a fidelity; it trains from scratch to that many epochs (rounded up) and its value
    there is told back. DEHB minimises, so it is told the value's negative; its cost is the
    epochs run. Its files (state, incumbent, log) go to a folder that is removed."""

    def __init__(self, seed: int, folder: str) -> None:
        from dehb import DEHB
        from loguru import logger

        space = dehb_space(seed)
        self.dehb = DEHB(
            cs=space,
            dimensions=len(space.get_hyperparameters()),
            # DEHB spaces its fidelities down from the maximum by eta and drops a level that
            # would fall below the minimum: 52/27 gives 1.9, 5.8, 17.3 and 52, run to 2, 6,
            # 18 and 52 epochs, the rungs the other methods' ASHA has (MIN_RESOURCE=2 gave
            # none at 2).
            min_fidelity=EPOCHS / REDUCTION ** _reductions_between(MIN_RESOURCE, EPOCHS),
            max_fidelity=EPOCHS,
            eta=REDUCTION,
            seed=seed,
            n_workers=1,
            output_path=folder,
            save_freq="end",  # only run() saves at its end: never, asked and told
        )
        logger.remove()  # its sinks: a WARNING line per run on stdout, and a log file
        self.jobs: dict[int, tuple[dict[str, Any], int]] = {}

    def suggest(self) -> tuple[int, dict[str, object]]:
        job = self.dehb.ask()
        number = len(self.jobs)
        self.jobs[number] = (job, int(np.ceil(job["fidelity"] - 1e-9)))
        return number, dict(job["config"].get_dictionary())

    def on_report(self, trial: int, epoch: int, value: float) -> bool:
        return epoch < self.jobs[trial][1]

    def on_end(self, trial: int, epoch: int, value: float, stopped: bool) -> None:
        job, _ = self.jobs[trial]
        self.dehb.tell(job, {"fitness": -value, "cost": float(epoch)})
