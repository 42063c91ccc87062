"""TPE on arrays against Optuna's TPE, and what a proposal costs as trials accumulate."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.samplers import TPESampler
from optuna.trial import TrialState

from scaletune.spec import ContinuousRange, ObjectiveType
from scaletune.tuning import TrialResult
from scaletune.tuning._lastvalue import LastValueSearcher
from scaletune.tuning._parzen import EXACT_KERNELS, ParzenModel, Work, axis_for

SPACE: dict[str, BaseDistribution] = {
    "rate": FloatDistribution(1e-4, 1.0, log=True),
    "dropout": FloatDistribution(0.0, 0.9),
    "layers": IntDistribution(1, 8),
    "units": IntDistribution(16, 1024, log=True),
    "optimiser": CategoricalDistribution(["sgd", "adam", "rmsprop"]),
}


def _history(trials: int, seed: int) -> tuple[list[dict[str, object]], np.ndarray]:
    """Configurations that cluster, as a search's do, and a value that favours some."""
    rng = np.random.default_rng(seed)
    configs: list[dict[str, object]] = []
    for _ in range(trials):
        configs.append(
            {
                "rate": float(np.exp(rng.uniform(np.log(1e-4), 0))),
                "dropout": float(np.clip(rng.normal(0.3, 0.2), 0.0, 0.9)),
                "layers": int(rng.integers(1, 9)),
                "units": int(np.clip(np.exp(rng.normal(5.5, 1.0)), 16, 1024)),
                "optimiser": ["sgd", "adam", "rmsprop"][int(rng.integers(3))],
            }
        )
    values = np.array(
        [
            -abs(np.log10(float(c["rate"])) + 2.5)  # type: ignore[arg-type]
            - abs(float(c["dropout"]) - 0.2)  # type: ignore[arg-type]
            + 0.1 * (c["optimiser"] == "adam")
            + rng.normal(0, 0.05)
            for c in configs
        ]
    )
    return configs, values


def _optuna_proposals(
    configs: list[dict[str, object]], values: np.ndarray, seed: int, proposals: int
) -> list[dict[str, object]]:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # as the searcher built it before: independent per hyperparameter
    sampler = TPESampler(seed=seed, n_startup_trials=0, n_ei_candidates=8, multivariate=False)
    study = optuna.create_study(direction="maximize", sampler=sampler)
    study.add_trials(
        [
            optuna.trial.create_trial(params=c, distributions=SPACE, value=float(v))
            for c, v in zip(configs, values, strict=True)
        ]
    )
    asked = []
    for _ in range(proposals):
        trial = study.ask(SPACE)
        study.tell(trial, state=TrialState.FAIL)
        asked.append(trial.params)
    return asked


def _array_proposals(
    configs: list[dict[str, object]], values: np.ndarray, seed: int, proposals: int
) -> tuple[list[dict[str, object]], Work]:
    axes = {name: axis_for(d) for name, d in SPACE.items()}
    points = np.array([[axis.internal(c[name]) for name, axis in axes.items()] for c in configs])
    model = ParzenModel(axes, points, -values)
    draws, work = np.random.RandomState(seed), Work()
    return [model.propose(draws, 8, work) for _ in range(proposals)], work


def _same(ours: dict[str, object], theirs: dict[str, object]) -> bool:
    return all(
        ours[name] == pytest.approx(theirs[name], rel=1e-6)
        if isinstance(theirs[name], float)
        else ours[name] == theirs[name]
        for name in SPACE
    )


@pytest.mark.parametrize("trials", [1, 7, 40, 300])
def test_the_same_proposals_as_optunas_tpe_on_the_same_trials_and_seed(trials: int) -> None:
    """Optuna's TPE, rebuilt from scratch on the same trials (what the searcher did before),
    and the array model draw the same candidates and keep the same one, for every kind of
    range: continuous, log, whole numbers (log too) and categories."""
    configs, values = _history(trials, seed=trials)
    ours, _ = _array_proposals(configs, values, seed=11, proposals=30)
    theirs = _optuna_proposals(configs, values, seed=11, proposals=30)
    mismatched = [(o, t) for o, t in zip(ours, theirs, strict=True) if not _same(o, t)]
    assert not mismatched


def test_past_the_exact_kernels_the_grid_keeps_nearly_every_proposal() -> None:
    """With thousands of trials the bad trials' narrow kernels are summed on a grid: the
    density differs from the exact sum by far less than candidates differ, so the kept
    candidate is the same almost always (every time here; a near tie could flip one)."""
    configs, values = _history(2000, seed=3)
    ours, _ = _array_proposals(configs, values, seed=5, proposals=40)
    theirs = _optuna_proposals(configs, values, seed=5, proposals=40)
    assert sum(_same(o, t) for o, t in zip(ours, theirs, strict=True)) >= 39


def test_the_grid_sums_kernels_as_the_exact_mixture_does() -> None:
    axis = axis_for(FloatDistribution(1e-4, 1.0, log=True))
    rng = np.random.default_rng(0)
    values = np.exp(rng.uniform(np.log(1e-4), 0, 5 * EXACT_KERNELS))
    weights = rng.uniform(0.1, 1, len(values))
    gridded = axis.kernels(values, weights)
    exact_limit = "scaletune.tuning._parzen.EXACT_KERNELS"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(exact_limit, 10**9)
        exact = axis.kernels(values, weights)
    x = np.exp(np.linspace(np.log(1e-4), 0, 997))
    difference = gridded.log_pdf(x, Work()) - exact.log_pdf(x, Work())
    assert np.max(np.abs(difference)) < 1e-3


def test_a_proposals_work_does_not_grow_with_the_trials() -> None:
    small_configs, small_values = _history(2_000, seed=1)
    large_configs, large_values = _history(40_000, seed=2)
    _, small = _array_proposals(small_configs, small_values, seed=0, proposals=20)
    _, large = _array_proposals(large_configs, large_values, seed=0, proposals=20)
    # 5 hyperparameters x 8 candidates x (26 good kernels + the bad ones left exact: at most
    # 2 x 100 wider than the grid's, the prior, the grid itself)
    bound = 5 * 8 * (26 + 2 * 100 + 2)
    assert large.per_proposal() <= bound
    assert large.per_proposal() <= 1.2 * small.per_proposal()


def test_fits_cost_a_bounded_amount_a_report_however_many_trials() -> None:
    """A fit of m values follows m / 20 changed values: each report pays for 20 values' worth
    of fitting at most, where rebuilding at every proposal would pay for all of them."""
    searcher = LastValueSearcher(
        {"x": ContinuousRange(min_value=0, max_value=1)}, ObjectiveType.MAXIMIZE, 0
    )
    reports = 0
    for _ in range(6_000):
        suggestion = searcher.suggest()
        x = float(suggestion.config["x"])  # type: ignore[arg-type]
        for step in (1, 2, 3):
            searcher.on_report(suggestion.number, step, -abs(x - 0.3) * (4 - step))
            reports += 1
    assert searcher.work.fitted_values <= 20 * reports
    assert searcher.work.per_proposal() <= 8 * (26 + 2 * 100 + 2)
    assert searcher.fits > 100


def test_a_searchers_proposals_through_a_job_are_those_of_the_optuna_study_it_rebuilt() -> None:
    """The whole searcher as a tuning job drives it (random proposals, running trials'
    reports, failures, refits): the same configurations as the searcher that rebuilt an
    Optuna study at each fit, which is what it did before."""
    from benchmarks.tuning._optuna_lastvalue import OptunaLastValueSearcher

    ranges = {
        "x": ContinuousRange(min_value=0, max_value=1),
        "rate": ContinuousRange(min_value=1e-4, max_value=1, scaling="Logarithmic"),
    }
    arrays = LastValueSearcher(ranges, ObjectiveType.MINIMIZE, 7)
    rebuilt = OptunaLastValueSearcher(ranges, ObjectiveType.MINIMIZE, 7, sampler_options={})
    for number in range(300):
        ours, theirs = arrays.suggest(), rebuilt.suggest()
        assert ours.config == pytest.approx(theirs.config, rel=1e-6)
        x, rate = float(ours.config["x"]), float(ours.config["rate"])  # type: ignore[arg-type]
        for searcher in (arrays, rebuilt):
            for step in (1, 2):
                searcher.on_report(number, step, abs(x - 0.7) + abs(np.log10(rate) + 2) / step)
            if number % 17 == 0:
                searcher.observe(TrialResult(number, None))  # failed
    assert arrays.fits == rebuilt.fits > 50


def test_uniform_draws_follow_each_ranges_prior() -> None:
    rng = np.random.default_rng(0)
    log = axis_for(FloatDistribution(1e-4, 1.0, log=True)).uniform(rng, 20_000)
    assert log.min() >= 1e-4 and log.max() <= 1.0
    # log-uniform: each decade about a quarter of the draws, not 90 % in the last one
    decades = np.histogram(np.log10(log), bins=[-4, -3, -2, -1, 0])[0] / len(log)
    assert np.allclose(decades, 0.25, atol=0.02)
    whole = axis_for(IntDistribution(1, 5)).uniform(rng, 20_000)
    assert set(whole) == {1.0, 2.0, 3.0, 4.0, 5.0}  # the ends as often as the middle
    assert np.allclose(np.bincount(whole.astype(int))[1:] / len(whole), 0.2, atol=0.02)
    kinds = axis_for(CategoricalDistribution(["a", "b", "c"])).uniform(rng, 3_000)
    assert set(kinds) == {0.0, 1.0, 2.0}
