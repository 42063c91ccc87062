"""Compensating an asynchronous gradient for the updates applied since its weights were sent,
and the optimiser's momentum for the momentum that asynchrony itself adds.

A push computed on weights `staleness` updates old points where the weights were, not where
they are. `StalenessScaledRate` (Zhang et al., IJCAI 2016) takes a step 1/staleness as long,
so a stale gradient moves the weights less. `DelayCompensation` (DC-ASGD, Zheng et al., ICML
2017) corrects the gradient itself with a first-order Taylor term, the Hessian approximated
by the gradient's outer product's diagonal: g + lambda g * g * (w_now - w_pulled), lambda
adapted to the gradient's scale by its running mean square (their DC-ASGD-a)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from scaletune.spec import DistributionSpec, ImplicitMomentum, StalenessCompensation

MEAN_SQUARE_DECAY = 0.95  # DC-ASGD-a's moving average of g^2
STALENESS_DECAY = 0.99  # the running mean staleness that sets the implicit momentum
EPSILON = 1e-7
MEAN_SQUARE_FLOOR = 1e-30  # far below EPSILON^2, far above float32's denormals (1.2e-38)


class Compensator(Protocol):
    @property
    def needs_pulled_weights(self) -> bool:
        """Whether `compensate` needs the weights the gradient was computed on."""
        ...

    def compensate(
        self,
        gradient: torch.Tensor,
        staleness: int,
        now: torch.Tensor | None,
        pulled: torch.Tensor | None,
    ) -> tuple[torch.Tensor, float]:
        """The gradient to apply and the factor on the learning rate."""
        ...

    def state(self) -> dict[str, Any] | None: ...

    def restore(self, state: dict[str, Any]) -> None: ...


class _Stateless:
    """A compensation with nothing to checkpoint, that needs only the push itself."""

    needs_pulled_weights = False

    def state(self) -> dict[str, Any] | None:
        return None

    def restore(self, state: dict[str, Any]) -> None:
        pass


class NoCompensation(_Stateless):
    def compensate(
        self,
        gradient: torch.Tensor,
        staleness: int,
        now: torch.Tensor | None,
        pulled: torch.Tensor | None,
    ) -> tuple[torch.Tensor, float]:
        return gradient, 1.0


class StalenessScaledRate(_Stateless):
    def compensate(
        self,
        gradient: torch.Tensor,
        staleness: int,
        now: torch.Tensor | None,
        pulled: torch.Tensor | None,
    ) -> tuple[torch.Tensor, float]:
        return gradient, 1.0 / max(1, staleness)


@dataclass
class DelayCompensation:
    strength: float  # lambda_0
    needs_pulled_weights: bool = True
    _mean_square: torch.Tensor | None = field(default=None, repr=False)

    def compensate(
        self,
        gradient: torch.Tensor,
        staleness: int,
        now: torch.Tensor | None,
        pulled: torch.Tensor | None,
    ) -> tuple[torch.Tensor, float]:
        squared = gradient.square()
        if self._mean_square is None:
            self._mean_square = squared.clone()
        else:
            # Floored: where the gradient stays 0 (a pixel that is 0 in every image) the mean
            # decays into denormal floats, and every pass over them is many times slower.
            self._mean_square.lerp_(squared, 1 - MEAN_SQUARE_DECAY).clamp_(min=MEAN_SQUARE_FLOOR)
        if staleness == 0 or pulled is None or now is None:
            return gradient, 1.0
        # g + lambda_0 (now - pulled) g^2 / (sqrt(mean square) + eps) in seven passes over the
        # weights: the server applies pushes one at a time, so this is on every push's path.
        weight = self._mean_square.sqrt().add_(EPSILON)
        torch.div(squared, weight, out=weight)
        return gradient.addcmul(torch.sub(now, pulled), weight, value=self.strength), 1.0

    def state(self) -> dict[str, Any] | None:
        return {"mean_square": self._mean_square}

    def restore(self, state: dict[str, Any]) -> None:
        self._mean_square = state["mean_square"]


@dataclass
class ImplicitMomentumCorrection:
    """Mitliagkas et al. (2016): with a mean staleness s, asynchronous updates behave like
    momentum s / (1 + s) (1 - 1/N for N workers) on top of the optimiser's own; stacked, the
    two oscillate where either alone would not. The optimiser's momentum is lowered by the
    implicit part, measured from the pushes' running mean staleness (starting from N - 1)."""

    momentum: float  # what the job asked for
    mean_staleness: float

    def explicit(self, staleness: int) -> float:
        """The optimiser's momentum for a push of this staleness."""
        self.mean_staleness = (
            STALENESS_DECAY * self.mean_staleness + (1 - STALENESS_DECAY) * staleness
        )
        implicit = self.mean_staleness / (1 + self.mean_staleness)
        return max(0.0, self.momentum - implicit)


RESTORATION_WINDOW_ROUNDS = 5  # a window of pushes: this many times the workers
RESTORATION_CEILING = 4.0
RESTORATION_GROWTH = 1.25
# A push whose loss is this many times the last window's mean ends the restored step at once:
# a step that diverges can do so within one window, before the window's mean says so.
RESTORATION_SPIKE = 2.0


@dataclass
class StepRestoration:
    """The step that taking off the implicit momentum shortens, given back while the training
    loss keeps falling (`implicit_momentum = "adapt"`).

    Asynchrony's momentum lengthens the step only where the step is long enough to oscillate.
    At a small one, N workers' pushes with the explicit momentum m_e left after the correction
    move the weights about N (1 - m) / (1 - m_e) as far an epoch as the synchronous rounds (a
    third at 2 workers and momentum 0.9): the job under-steps. The step is scaled by up to the
    inverse of that (the measured mean staleness s standing for N - 1, the ceiling 4), the
    factor raised by a quarter after each window of pushes whose mean loss fell and halved,
    down to 1, after one whose loss rose: where the longer step destabilises, it is taken
    back. A push whose loss is RESTORATION_SPIKE times the last window's mean takes it back
    at once, without waiting for the window to close; a loss that is not a number counts as
    a rise (benchmarks/results/convergence_async_grid.md)."""

    momentum: float  # what the job asked for
    window: int  # pushes a window
    factor: float = 1.0
    previous: float | None = None  # the last window's mean loss
    _loss: float = 0.0
    _examples: int = 0
    _pushes: int = 0

    def step_factor(
        self, explicit: float, mean_staleness: float, loss: float, examples: int
    ) -> float:
        """The factor on this push's learning rate, after counting its loss (a sum over
        `examples`) into the window under way."""
        # `not <=`: a loss that is not a number is a spike too.
        spiked = bool(examples) and not loss / examples <= RESTORATION_SPIKE * (
            self.previous if self.previous is not None else math.inf
        )
        if self.factor > 1 and spiked:
            self.factor = 1.0
            self._loss, self._examples, self._pushes = 0.0, 0, 0
            return self.factor
        self._loss += loss
        self._examples += examples
        self._pushes += 1
        if self._pushes < self.window or not self._examples:
            return self.factor
        mean = self._loss / self._examples
        if self.previous is not None and not mean <= self.previous:
            self.factor = max(1.0, self.factor / 2)
        elif self.previous is not None:
            shortfall = (1 - explicit) / ((1 + mean_staleness) * max(1 - self.momentum, 1e-3))
            target = min(RESTORATION_CEILING, max(1.0, shortfall))
            self.factor = min(target, self.factor * RESTORATION_GROWTH)
        self.previous = mean
        self._loss, self._examples, self._pushes = 0.0, 0, 0
        return self.factor

    def state(self) -> dict[str, Any]:
        return {"factor": self.factor, "previous": self.previous}

    def restore(self, state: dict[str, Any]) -> None:
        self.factor, self.previous = float(state["factor"]), state["previous"]


@dataclass(frozen=True)
class AsyncRemedies:
    """What an asynchronous server does about staleness, as `[distribution]` asks."""

    compensation: Compensator
    momentum: ImplicitMomentumCorrection | None = None
    restoration: StepRestoration | None = None

    @classmethod
    def none(cls) -> AsyncRemedies:
        """A synchronous server's: its rounds are never stale."""
        return cls(NoCompensation())

    @classmethod
    def of(cls, distribution: DistributionSpec, momentum: float, workers: int) -> AsyncRemedies:
        """`momentum`: the optimiser's, as the job asked; `workers`: the job's size, whose
        staleness (N - 1) the running mean starts from."""
        kind = distribution.staleness_compensation
        compensation: Compensator = NoCompensation()
        if kind is StalenessCompensation.LR:
            compensation = StalenessScaledRate()
        elif kind in (StalenessCompensation.DC, StalenessCompensation.AUTO):
            compensation = DelayCompensation(distribution.dc_lambda)
        if distribution.implicit_momentum is ImplicitMomentum.IGNORE:
            return cls(compensation)
        correction = ImplicitMomentumCorrection(momentum, workers - 1)
        if distribution.implicit_momentum is ImplicitMomentum.SUBTRACT:
            return cls(compensation, correction)
        window = RESTORATION_WINDOW_ROUNDS * workers
        return cls(compensation, correction, StepRestoration(momentum, window))
