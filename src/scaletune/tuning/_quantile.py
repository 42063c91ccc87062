"""Proposals from conformalized quantile regression on every trial's latest value (the model
of Salinas et al., ICML 2023, that Syne Tune's ASHA-CQR runs), for Hyperband.

The data are `LatestValuesSearcher`'s: each trial's latest report, running trials included. The
model is gradient-boosted trees (XGBoost's quantile loss, one forest for all quantiles) that
predict a few quantiles of the loss at a configuration; past `CONFORMAL_FROM` trials a tenth
of them is held out and the outer quantiles widened until they cover it as they claim. A fit
draws `candidates` configurations from the ranges' priors and predicts their quantiles once;
each proposal then draws one quantile a candidate (a Thompson-like sample of the model's
belief) and takes the candidate whose draw is best, never the same one twice. Trees, unlike
independent TPE, see how the hyperparameters act together. `TPEThenQuantileSearcher`,
Hyperband's default, proposes with LastValueTPE's model until `CONFORMAL_FROM` trials have
values.

Fits follow the latest values as LastValueTPE's do (once a twentieth have changed, five
at least) until `NEW_TRIALS_ONLY_FROM` trials have values, then once the trials have grown by a
twentieth: a fit costs a forest, not a Parzen count, and with rungs that let trials run, every
report of a running trial is a change, so the first rule refits every few trials however many
there are. Past that many trials a running trial's newer value moves the model little. Fits
use `MAX_FIT_TRIALS` trials at most (a random subset past that), so a fit's cost is bounded
and a proposal's is a draw over the candidates.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from scaletune.spec import ObjectiveType, Range
from scaletune.tuning._lastvalue import (
    TPE_CANDIDATES,
    TPE_RANDOM_FRACTION,
    LatestValuesSearcher,
)
from scaletune.tuning._searchers import Config

QUANTILES = (1 / 6, 2 / 6, 3 / 6, 4 / 6, 5 / 6)  # symmetric about the median, as CQR's five
CONFORMAL_FROM = 32  # trials before a tenth is held out to widen the outer quantiles
HELD_OUT = 0.1
MAX_FIT_TRIALS = 2048
# Trials with values from which only new trials count towards a refit (module doc); the
# LCBench jobs the searcher was measured on stay below it (under 100 trials).
NEW_TRIALS_ONLY_FROM = 256
ROUNDS = 100  # boosting rounds of depth-3 trees (scikit-learn's gradient boosting defaults)


@dataclass
class _Candidates:
    """A fit's random configurations (as `Axis.internal` gives them) and their predicted
    quantiles of the loss, one row a candidate; the ones proposed already are marked."""

    points: np.ndarray
    quantiles: np.ndarray
    taken: np.ndarray


class QuantileSearcher(LatestValuesSearcher):
    def __init__(
        self,
        ranges: Mapping[str, Range],
        objective: ObjectiveType,
        seed: int,
        *,
        candidates: int = 2000,
        random_fraction: float = 0.0,  # the model's draws explore already
        first: Sequence[Config] = (),
    ) -> None:
        super().__init__(ranges, objective, seed, random_fraction=random_fraction, first=first)
        self._candidates = candidates
        self._pool: _Candidates | None = None
        self._quantile_rng = np.random.default_rng([seed, 5])

    def _ask_model(self) -> dict[str, object]:
        if self._pool is None or self._model_is_stale() or self._pool.taken.all():
            self._pool = self._fit()  # (every candidate proposed: new ones, from a new fit)
        pool = self._pool
        draws = pool.quantiles[
            np.arange(len(pool.quantiles)),
            self._quantile_rng.integers(0, len(QUANTILES), len(pool.quantiles)),
        ]
        draws[pool.taken] = np.inf
        best = int(np.argmin(draws))
        pool.taken[best] = True
        self._work.proposals += 1
        return {
            name: axis.external(pool.points[best, column])
            for column, (name, axis) in enumerate(self._axes.items())
        }

    def _model_is_stale(self) -> bool:
        if self._fitted_on < NEW_TRIALS_ONLY_FROM:
            return super()._model_is_stale()
        return len(self._latest) - self._fitted_on >= int(self._refit_fraction * self._fitted_on)

    def _fit(self) -> _Candidates:
        rng = np.random.default_rng(self._fitted())
        live, losses = self._live()
        if len(live) > MAX_FIT_TRIALS:
            kept = np.sort(rng.choice(len(live), MAX_FIT_TRIALS, replace=False))
            live, losses = live[kept], losses[kept]
        points = self._points[live]
        candidates = np.column_stack(
            [axis.uniform(rng, self._candidates) for axis in self._axes.values()]
        )
        quantiles = _conformal_quantiles(points, losses, candidates, rng)
        return _Candidates(candidates, quantiles, np.zeros(len(candidates), dtype=bool))


class TPEThenQuantileSearcher(QuantileSearcher):
    """LastValueTPE's proposals until `CONFORMAL_FROM` trials have values, then the quantile
    regression's: before then its trees fit few trials and no held-out ones check their
    quantiles. A job of fewer trials is LastValueTPE's throughout, proposal for proposal."""

    def _share_of_random_proposals(self) -> float:
        return TPE_RANDOM_FRACTION if self._tpe_proposes() else super()._share_of_random_proposals()

    def _ask_model(self) -> dict[str, object]:
        return self._ask_parzen(TPE_CANDIDATES) if self._tpe_proposes() else super()._ask_model()

    def _tpe_proposes(self) -> bool:
        return len(self._latest) < CONFORMAL_FROM


def _conformal_quantiles(
    points: np.ndarray, losses: np.ndarray, candidates: np.ndarray, rng: np.random.Generator
) -> np.ndarray:
    """The candidates' predicted quantiles of the loss, one column a quantile of QUANTILES;
    past CONFORMAL_FROM trials each outer pair widened by its conformal correction."""
    if len(losses) <= CONFORMAL_FROM:
        forest = _forest(points, losses, rng)
        return _in_order(forest.inplace_predict(candidates).reshape(len(candidates), -1))
    order = rng.permutation(len(losses))
    held = order[: max(1, round(HELD_OUT * len(losses)))]
    kept = order[len(held) :]
    forest = _forest(points[kept], losses[kept], rng)
    predicted = forest.inplace_predict(candidates).reshape(len(candidates), -1)
    checked = forest.inplace_predict(points[held]).reshape(len(held), -1)
    truth = losses[held]
    last = len(QUANTILES) - 1
    for low in range(len(QUANTILES) // 2):
        high = last - low
        coverage = QUANTILES[high] - QUANTILES[low]
        misses = np.maximum(checked[:, low] - truth, truth - checked[:, high])
        correction = float(np.quantile(misses, min(1.0, coverage * (1 + 1 / len(truth)))))
        predicted[:, low] -= correction
        predicted[:, high] += correction
    return _in_order(predicted)


def _in_order(quantiles: np.ndarray) -> np.ndarray:
    """Quantiles fitted apart can cross; sorted, each row is a distribution again (a
    proposal's draw, one value of a row at random, is drawn alike either way)."""
    return np.sort(quantiles, axis=1)


def _forest(points: np.ndarray, losses: np.ndarray, rng: np.random.Generator) -> Any:
    import xgboost

    data = xgboost.DMatrix(points, label=losses)
    params = {
        "objective": "reg:quantileerror",
        "quantile_alpha": np.array(QUANTILES),
        "max_depth": 3,
        "eta": 0.1,
        "nthread": 1,
        "tree_method": "exact",
        "seed": int(rng.integers(2**31)),
        "verbosity": 0,
    }
    return xgboost.train(params, data, num_boost_round=ROUNDS)
