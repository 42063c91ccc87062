"""Gradient noise scale from data-parallel training, and AdaScale's gain from it.

McCandlish et al. (2018), appendix A.1: with |G_b|^2 the squared norm of a gradient averaged
over b examples, E|G_b|^2 = |G|^2 + tr(Sigma)/b. Two batch sizes give two equations: here the
mean of the S micro-batch gradients' own squared norms (b = micro-batch; S = workers x
accumulated micro-batches) and the averaged gradient's (B = S b). Solving gives unbiased
estimates of |G|^2 and tr(Sigma); each is smoothed on its own (a ratio of noisy estimates is
biased) and B_simple = tr(Sigma) / |G|^2 is the batch size beyond which a bigger batch buys
little more progress per step.

AdaScale's gain (Johnson et al. 2020) is the same two estimates at the two batch sizes:
r = (sigma^2 + mu^2) / (sigma^2 / S + mu^2), with sigma^2 = tr(Sigma) / b the variance of one
micro-batch's gradient and mu^2 = |G|^2, i.e. r = (1 + B_simple / b) / (1 + B_simple / B):
1 where the signal dominates, S where the noise does."""

from __future__ import annotations

from dataclasses import dataclass

Estimates = tuple[float, float] | None  # |G|^2 and tr(Sigma), smoothed: what a checkpoint keeps
DECAY = 0.95  # each estimate's moving average, per update measured
# AdaScale measures every update's squared norms where they are (each worker's own); every
# this many updates the workers pool them (one number summed across them) and the gain is
# estimated again from all the updates since. Pooled, the estimates average as many
# measurements over the same span as when each update's is summed across the workers; only
# the exchange, and the gain, wait a few updates. (Sampling one update in K instead either
# averages fewer measurements or lags a rising gain, and the job takes more updates.) By
# default every update: pooling over 4 cost a 2-worker CNN accuracy on 9 seeds of 10 for no
# update cost that the noise could tell apart (docs/benchmarks.md, the scale-out rows).
ADASCALE_ESTIMATE_EVERY = 1


@dataclass
class NormPool:
    """Squared norms of the updates measured since the gain was last estimated: this
    worker's micro-batch gradients' (summed over its micro-batches and the updates; over all
    workers once pooled), the averaged gradients' (the same on every worker), and how many
    updates they hold. A checkpoint keeps each worker's, so that a resumed job pools as the
    uninterrupted one does."""

    local: float = 0.0
    averaged: float = 0.0
    updates: int = 0

    def add(self, local: float, averaged: float) -> None:
        self.local += local
        self.averaged += averaged
        self.updates += 1

    def take(self) -> NormPool:
        """What the pool holds; it starts again empty."""
        taken = NormPool(self.local, self.averaged, self.updates)
        self.local, self.averaged, self.updates = 0.0, 0.0, 0
        return taken

    @property
    def state(self) -> tuple[float, float, int]:
        return (self.local, self.averaged, self.updates)

    def restore(self, state: tuple[float, float, int] | None) -> None:
        """A state saved from `state` (none: empty)."""
        self.local, self.averaged, self.updates = (0.0, 0.0, 0) if state is None else state


@dataclass
class GradientNoiseScale:
    small_batch: int
    big_batch: int
    decay: float = DECAY  # exponential moving average of each estimate
    _true_sq: float | None = None
    _trace: float | None = None

    def __post_init__(self) -> None:
        if self.big_batch <= self.small_batch:
            raise ValueError("needs two different batch sizes (more than one worker)")

    @property
    def estimates(self) -> Estimates:
        if self._true_sq is None or self._trace is None:
            return None
        return (self._true_sq, self._trace)

    def restore(self, estimates: Estimates) -> None:
        """Estimates saved from `estimates` (none: start afresh)."""
        self._true_sq, self._trace = (None, None) if estimates is None else estimates

    def update(self, small_sq: float, big_sq: float, updates: int = 1) -> None:
        """`small_sq`: the mean squared norm of one micro-batch's gradient, `big_sq`: of the
        averaged gradient; each a mean over `updates` updates, which the moving averages
        weigh as that many measurements (as `updates` calls with the same values would)."""
        b, big = self.small_batch, self.big_batch
        true_sq = (big * big_sq - b * small_sq) / (big - b)
        trace = (small_sq - big_sq) / (1 / b - 1 / big)
        decay = self.decay**updates
        self._true_sq = _smooth(self._true_sq, true_sq, decay)
        self._trace = _smooth(self._trace, trace, decay)

    def add(self, pooled: NormPool) -> None:
        """Updates pooled over every worker: `pooled.local` sums all S micro-batch gradients'
        squared norms of each update."""
        if pooled.updates:
            self.update(
                pooled.local / (self.scale * pooled.updates),
                pooled.averaged / pooled.updates,
                pooled.updates,
            )

    @property
    def scale(self) -> float:
        """S: how many micro-batches each update averages."""
        return self.big_batch / self.small_batch

    @property
    def gain(self) -> float:
        """AdaScale's r in [1, S]; 1 until the first estimate."""
        if self._true_sq is None or self._trace is None or self._trace <= 0:
            return 1.0
        if self._true_sq <= 0:  # no signal left to see beside the noise
            return self.scale
        b_simple = self._trace / self._true_sq
        return (1 + b_simple / self.small_batch) / (1 + b_simple / self.big_batch)

    @property
    def b_simple(self) -> float | None:
        """tr(Sigma) / |G|^2, or None until both estimates are positive."""
        if self._true_sq is None or self._trace is None or self._true_sq <= 0 or self._trace <= 0:
            return None
        return self._trace / self._true_sq


def _smooth(average: float | None, value: float, decay: float) -> float:
    return value if average is None else decay * average + (1 - decay) * value
