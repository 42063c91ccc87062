"""Compensating an asynchronous gradient for the updates applied since its weights were sent,
and the optimiser's momentum for the momentum that asynchrony itself adds.

A push computed on weights `staleness` updates old points where the weights were, not where
they are. `StalenessScaledRate` (Zhang et al., IJCAI 2016) takes a step 1/staleness as long,
so a stale gradient moves the weights less. `DelayCompensation` (DC-ASGD, Zheng et al., ICML
2017) corrects the gradient itself with a first-order Taylor term, the Hessian approximated
by the gradient's outer product's diagonal: g + lambda g * g * (w_now - w_pulled), lambda
adapted to the gradient's scale by its running mean square (their DC-ASGD-a)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

MEAN_SQUARE_DECAY = 0.95  # DC-ASGD-a's moving average of g^2
STALENESS_DECAY = 0.99  # the running mean staleness that sets the implicit momentum
EPSILON = 1e-7


class Compensator(Protocol):
    @property
    def needs_pulled_weights(self) -> bool:
        """Whether `compensate` needs the weights the gradient was computed on."""
        ...

    def compensate(
        self,
        gradient: torch.Tensor,
        staleness: int,
        now: torch.Tensor,
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
        now: torch.Tensor,
        pulled: torch.Tensor | None,
    ) -> tuple[torch.Tensor, float]:
        return gradient, 1.0


class StalenessScaledRate(_Stateless):
    def compensate(
        self,
        gradient: torch.Tensor,
        staleness: int,
        now: torch.Tensor,
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
        now: torch.Tensor,
        pulled: torch.Tensor | None,
    ) -> tuple[torch.Tensor, float]:
        squared = gradient * gradient
        if self._mean_square is None:
            self._mean_square = squared.clone()
        else:
            self._mean_square.mul_(MEAN_SQUARE_DECAY).add_(squared, alpha=1 - MEAN_SQUARE_DECAY)
        if staleness == 0 or pulled is None:
            return gradient, 1.0
        strength = self.strength / (self._mean_square.sqrt() + EPSILON)
        return gradient + strength * squared * (now - pulled), 1.0

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
