"""TPE's proposal rule fitted on arrays: Optuna's univariate TPE (its split of the trials into
good and bad, their weights, bandwidths, prior and candidates) without a study to rebuild.

A fit sorts each hyperparameter's values once. A proposal evaluates the good trials' density
(25 kernels at most) and the bad trials' at a few candidates. Of the bad trials' kernels all
but a few hundred share one bandwidth (Optuna's smallest; see `_bandwidths`); past
`EXACT_KERNELS` of them, those are summed once on a fixed grid at the fit, so a proposal's
work does not grow with the number of trials.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
from scipy import special

if TYPE_CHECKING:
    from optuna.distributions import BaseDistribution

PRIOR_WEIGHT = 1.0  # one more kernel, over the whole range, in both densities
MOST_GOOD = 25  # the good trials: a tenth of them, 25 at most (Optuna's default_gamma)
FLAT = 25  # the newest 25 bad trials at full weight, older ones ramped down (default_weights)
EXACT_KERNELS = 512  # narrow kernels summed one by one up to this many, on the grid past it
GRID_POINTS = 4097
REACH = 8.0  # a kernel adds under 1e-14 of its peak beyond 8 bandwidths
_LOG_ROOT_2PI = 0.5 * math.log(2 * math.pi)


def good_count(trials: int) -> int:
    return min(math.ceil(0.1 * trials), MOST_GOOD)


def age_weights(trials: int) -> np.ndarray:
    """Weights of trials in the order they came: the oldest count least (Optuna's ramp)."""
    if trials < FLAT:
        return np.ones(trials)
    return np.concatenate([np.linspace(1.0 / trials, 1.0, num=trials - FLAT), np.ones(FLAT)])


@dataclass
class Work:
    """What proposals cost the model, counted (a test holds it flat as trials accumulate)."""

    proposals: int = 0
    kernel_evaluations: int = 0  # one kernel at one candidate
    fitted_values: int = 0  # values passed through fits

    def per_proposal(self) -> float:
        return self.kernel_evaluations / max(self.proposals, 1)


class Kernels:
    """A weighted mixture of kernels on one hyperparameter: the density TPE compares."""

    def sample(self, rng: np.random.RandomState, size: int) -> np.ndarray:
        raise NotImplementedError

    def log_pdf(self, x: np.ndarray, work: Work) -> np.ndarray:
        raise NotImplementedError


class Axis:
    """One hyperparameter as TPE sees it; `kernels` fits a density to values of it."""

    def kernels(self, values: np.ndarray, weights: np.ndarray) -> Kernels:
        raise NotImplementedError

    def external(self, x: float) -> object:
        """A sample as the range's own value (an int, a float, a category)."""
        raise NotImplementedError

    def internal(self, value: object) -> float:
        raise NotImplementedError

    def uniform(self, rng: np.random.Generator, size: int) -> np.ndarray:
        """Draws from the range's own prior (log-uniform on a log range), as `internal` gives
        values: for models that compare candidates drawn at random."""
        raise NotImplementedError


def axis_for(distribution: BaseDistribution) -> Axis:
    from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution

    if isinstance(distribution, CategoricalDistribution):
        return CategoricalAxis(tuple(distribution.choices))
    if isinstance(distribution, IntDistribution):
        low, high, log = distribution.low, distribution.high, distribution.log
        return NumericAxis(low, high, log=log, step=float(distribution.step))
    if isinstance(distribution, FloatDistribution) and distribution.step is None:
        return NumericAxis(distribution.low, distribution.high, log=distribution.log, step=None)
    raise ValueError(f"TPE on arrays does not model {distribution!r}")


@dataclass(frozen=True)
class NumericAxis(Axis):
    """A range of numbers: TPE works on the logarithm of a log range, and a whole number
    stands for the cell of width `step` around it."""

    low: float
    high: float
    log: bool
    step: float | None  # 1 for whole numbers, None for a continuous range
    lo: float = field(init=False)  # the bounds on TPE's scale
    hi: float = field(init=False)

    def __post_init__(self) -> None:
        lo, hi = self.low, self.high
        if self.step is not None:
            lo, hi = lo - self.step / 2, hi + self.step / 2
        if self.log:
            lo, hi = math.log(lo), math.log(hi)
        object.__setattr__(self, "lo", lo)
        object.__setattr__(self, "hi", hi)

    def scaled(self, values: np.ndarray) -> np.ndarray:
        return np.log(values) if self.log else np.asarray(values, dtype=float)

    def kernels(self, values: np.ndarray, weights: np.ndarray) -> Kernels:
        mus = self.scaled(values)
        sigmas = self._bandwidths(mus)
        width = self.hi - self.lo
        return NumericKernels(
            self,
            np.append(mus, 0.5 * (self.lo + self.hi)),
            np.append(sigmas, width),
            _normalised(weights),
            narrowest=width / min(100.0, len(mus) + 2.0),
        )

    def _bandwidths(self, mus: np.ndarray) -> np.ndarray:
        """Each kernel's: the wider gap to its neighbours (the range's ends count as
        neighbours, but not for the outermost two), kept within [range / min(100, n + 2),
        range]. The gaps add up to the range, so fewer than 2 x 100 kernels are wider than
        the smallest bandwidth."""
        if len(mus) == 0:
            return np.empty(0)
        order = np.argsort(mus)
        ends = np.concatenate([[self.lo], mus[order], [self.hi]])
        sigmas = np.maximum(ends[1:-1] - ends[:-2], ends[2:] - ends[1:-1])
        if len(ends) >= 4:
            sigmas[0] = ends[2] - ends[1]
            sigmas[-1] = ends[-2] - ends[-3]
        width = self.hi - self.lo
        unsorted = np.empty_like(sigmas)
        unsorted[order] = sigmas
        return np.asarray(np.clip(unsorted, width / min(100.0, len(mus) + 2.0), width))

    def external(self, x: float) -> object:
        return int(x) if self.step is not None else float(x)

    def uniform(self, rng: np.random.Generator, size: int) -> np.ndarray:
        x = rng.uniform(self.lo, self.hi, size)
        if self.log:
            x = np.exp(x)
        if self.step is not None:
            x = np.clip(
                self.low + np.round((x - self.low) / self.step) * self.step, self.low, self.high
            )
        return np.asarray(x)

    def internal(self, value: object) -> float:
        return float(value)  # type: ignore[arg-type]


@dataclass(frozen=True)
class CategoricalAxis(Axis):
    choices: tuple[object, ...]

    def kernels(self, values: np.ndarray, weights: np.ndarray) -> Kernels:
        kernels = len(values) + 1
        rows = np.full((kernels, len(self.choices)), PRIOR_WEIGHT / kernels)
        rows[np.arange(len(values)), values.astype(int)] += 1
        rows /= rows.sum(axis=1, keepdims=True)
        return CategoricalKernels(rows, _normalised(weights))

    def external(self, x: float) -> object:
        return self.choices[int(x)]

    def internal(self, value: object) -> float:
        return float(self.choices.index(value))

    def uniform(self, rng: np.random.Generator, size: int) -> np.ndarray:
        return rng.integers(0, len(self.choices), size).astype(float)


def _normalised(weights: np.ndarray) -> np.ndarray:
    if len(weights) == 0:
        return np.array([1.0])  # the prior alone
    weights = np.append(weights, PRIOR_WEIGHT)
    return np.asarray(weights / weights.sum())


class CategoricalKernels(Kernels):
    def __init__(self, rows: np.ndarray, weights: np.ndarray) -> None:
        self._rows = rows
        self._weights = weights
        self._log_mixture = np.log(weights @ rows)  # every choice's density, summed once

    def sample(self, rng: np.random.RandomState, size: int) -> np.ndarray:
        active = rng.choice(len(self._weights), p=self._weights, size=size)
        quantiles = rng.rand(size)
        cumulative = np.cumsum(self._rows[active], axis=-1)
        cumulative[:, -1] = 1
        return np.asarray(np.sum(cumulative < quantiles[:, np.newaxis], axis=-1), dtype=float)

    def log_pdf(self, x: np.ndarray, work: Work) -> np.ndarray:
        work.kernel_evaluations += len(x)
        return np.asarray(self._log_mixture[x.astype(int)])


class NumericKernels(Kernels):
    """Truncated normals on [lo, hi] (of TPE's scale); for whole numbers, their mass over
    each number's cell. Kernels of the narrowest bandwidth past `EXACT_KERNELS` are summed on
    a grid; the others (a few hundred at most) one by one."""

    def __init__(
        self,
        axis: NumericAxis,
        mus: np.ndarray,
        sigmas: np.ndarray,
        weights: np.ndarray,
        *,
        narrowest: float,
    ) -> None:
        self._axis = axis
        self._mus, self._sigmas, self._weights = mus, sigmas, weights
        inside = _mass(axis.lo, axis.hi, mus, sigmas)  # each kernel's, within the bounds
        narrow = sigmas == narrowest
        narrow[-1] = False  # the prior
        self._grid: _Grid | None = None
        if np.count_nonzero(narrow) > EXACT_KERNELS:
            self._grid = _Grid(axis, mus[narrow], (weights / inside)[narrow], narrowest)
            keep = ~narrow
        else:
            keep = np.ones(len(mus), dtype=bool)
        self._exact_mus, self._exact_sigmas = mus[keep], sigmas[keep]
        self._exact_log_weights = np.log(weights[keep]) - np.log(inside[keep])

    def sample(self, rng: np.random.RandomState, size: int) -> np.ndarray:
        axis = self._axis
        active = rng.choice(len(self._weights), p=self._weights, size=size)
        mus, sigmas = self._mus[active], self._sigmas[active]
        quantiles = rng.uniform(low=0, high=1, size=size)
        x = _truncated_ppf(quantiles, (axis.lo - mus) / sigmas, (axis.hi - mus) / sigmas)
        x = x * sigmas + mus
        if axis.log:
            x = np.exp(x)
        if axis.step is not None:
            x = axis.low + np.round((x - axis.low) / axis.step) * axis.step
            x = np.clip(x, axis.low, axis.high)
        return np.asarray(x)

    def log_pdf(self, x: np.ndarray, work: Work) -> np.ndarray:
        axis = self._axis
        work.kernel_evaluations += len(x) * (len(self._exact_mus) + (self._grid is not None))
        mus, sigmas = self._exact_mus, self._exact_sigmas
        if axis.step is None:
            z = (axis.scaled(x)[:, np.newaxis] - mus) / sigmas
            terms = self._exact_log_weights - np.log(sigmas) - 0.5 * z**2 - _LOG_ROOT_2PI
            binned = self._grid.density(axis.scaled(x)) if self._grid is not None else None
        else:
            left = axis.scaled(x - axis.step / 2)
            right = axis.scaled(x + axis.step / 2)
            with np.errstate(divide="ignore"):
                cells = np.log(_mass(left[:, np.newaxis], right[:, np.newaxis], mus, sigmas))
            terms = self._exact_log_weights + cells
            binned = self._grid.mass(left, right) if self._grid is not None else None
        total = _logsumexp(terms)
        if binned is None:
            return total
        with np.errstate(divide="ignore"):
            return np.asarray(np.logaddexp(total, np.log(binned)))


class _Grid:
    """Kernels of one bandwidth summed at evenly spaced points: each kernel's weight split
    between its two nearest points, then smoothed by the kernel (a convolution)."""

    def __init__(self, axis: NumericAxis, mus: np.ndarray, weights: np.ndarray, sigma: float):
        self._points = np.linspace(axis.lo, axis.hi, GRID_POINTS)
        spacing = self._points[1] - self._points[0]
        where = np.clip((mus - axis.lo) / spacing, 0, GRID_POINTS - 1)
        index = np.minimum(where.astype(int), GRID_POINTS - 2)
        share = where - index
        binned = np.bincount(index, weights * (1 - share), minlength=GRID_POINTS)
        binned += np.bincount(index + 1, weights * share, minlength=GRID_POINTS)
        reach = min(math.ceil(REACH * sigma / spacing), GRID_POINTS - 1)
        offsets = np.arange(-reach, reach + 1) * spacing
        kernel = np.exp(-0.5 * (offsets / sigma) ** 2 - _LOG_ROOT_2PI) / sigma
        self._density = np.maximum(_convolve(binned, kernel)[reach : reach + GRID_POINTS], 0.0)
        # the mass from the low end to each point (trapezoids), for whole numbers' cells
        steps = 0.5 * (self._density[1:] + self._density[:-1]) * spacing
        self._cumulative = np.concatenate([[0.0], np.cumsum(steps)])

    def density(self, x: np.ndarray) -> np.ndarray:
        return np.asarray(np.interp(x, self._points, self._density))

    def mass(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        upper = np.interp(right, self._points, self._cumulative)
        return np.asarray(np.maximum(upper - np.interp(left, self._points, self._cumulative), 0))


def _convolve(signal: np.ndarray, kernel: np.ndarray) -> np.ndarray:
    size = len(signal) + len(kernel) - 1
    fft = 1 << (size - 1).bit_length()
    product = np.fft.rfft(signal, fft) * np.fft.rfft(kernel, fft)
    return np.fft.irfft(product, fft)[:size]


def _logsumexp(terms: np.ndarray) -> np.ndarray:
    """log(sum(exp(terms))) along each row (scipy's costs more than the sum at this size)."""
    top = terms.max(axis=1)
    top[np.isneginf(top)] = 0
    with np.errstate(divide="ignore"):
        return np.asarray(np.log(np.exp(terms - top[:, np.newaxis]).sum(axis=1)) + top)


def _mass(low: object, high: object, mus: np.ndarray, sigmas: np.ndarray) -> np.ndarray:
    """Each normal's mass between low and high, from the nearer tail (where it is precise)."""
    a = (np.asarray(low) - mus) / sigmas
    b = (np.asarray(high) - mus) / sigmas
    right = a > 0
    return np.asarray(
        np.where(right, special.ndtr(-a) - special.ndtr(-b), special.ndtr(b) - special.ndtr(a))
    )


def _truncated_ppf(q: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The point below which a fraction q of a standard normal truncated to [a, b] lies."""
    left = a < 0
    low_tail = special.ndtr(a) + q * (special.ndtr(b) - special.ndtr(a))
    high_tail = special.ndtr(-b) + (1 - q) * (special.ndtr(-a) - special.ndtr(-b))
    x = np.where(left, special.ndtri(low_tail), -special.ndtri(high_tail))
    return np.asarray(np.clip(x, a, b))


class ParzenModel:
    """TPE fitted on each trial's internal values (rows, in the order the trials came) and
    loss (lower is better: the objective's direction already applied)."""

    def __init__(self, axes: Mapping[str, Axis], points: np.ndarray, losses: np.ndarray):
        good = np.sort(np.argsort(losses, kind="stable")[: good_count(len(losses))])
        is_bad = np.ones(len(losses), dtype=bool)
        is_bad[good] = False
        bad = np.flatnonzero(is_bad)  # in the order the trials came, as `good` is
        self._axes = dict(axes)
        self._densities = [
            (
                axis.kernels(points[good, column], np.ones(len(good))),
                axis.kernels(points[bad, column], age_weights(len(bad))),
            )
            for column, axis in enumerate(self._axes.values())
        ]

    def propose(self, rng: np.random.RandomState, candidates: int, work: Work) -> dict[str, object]:
        """Each hyperparameter on its own: of `candidates` draws from the good trials' density,
        the one where it is largest against the bad trials'."""
        work.proposals += 1
        proposal: dict[str, object] = {}
        for (name, axis), (good, bad) in zip(self._axes.items(), self._densities, strict=True):
            draws = good.sample(rng, candidates)
            ratio = good.log_pdf(draws, work) - bad.log_pdf(draws, work)
            proposal[name] = axis.external(draws[int(np.argmax(ratio))])
        return proposal
