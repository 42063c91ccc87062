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
DECAY = 0.95  # each estimate's moving average, per measurement
# AdaScale's gain is measured on every this many updates by default, the last one taken
# between. Sampled, the estimates either average fewer measurements (noisier: a noisy |G|^2
# biases the gain up) or lag (the gain comes too low, and the job takes more updates): in the
# scale-out benchmark sampling held the accuracy but its extra updates cost more than the
# measurements it saved.
ADASCALE_MEASURE_EVERY = 1


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

    def update(self, small_sq: float, big_sq: float) -> None:
        b, big = self.small_batch, self.big_batch
        true_sq = (big * big_sq - b * small_sq) / (big - b)
        trace = (small_sq - big_sq) / (1 / b - 1 / big)
        self._true_sq = self._smooth(self._true_sq, true_sq)
        self._trace = self._smooth(self._trace, trace)

    def _smooth(self, average: float | None, value: float) -> float:
        return value if average is None else self.decay * average + (1 - self.decay) * value

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
