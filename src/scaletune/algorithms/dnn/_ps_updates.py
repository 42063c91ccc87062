"""What the parameter server does with the gradients it receives: one optimiser step each
round (sync) or push (async), at the learning rate of the job's pace, with AdaScale's gain
measured from a synchronous round's pushes and an asynchronous push's staleness compensated."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn
from torch.nn.utils import parameters_to_vector

from scaletune.gradient_noise import GradientNoiseScale

from ._checkpoint import Position
from ._common import restore_optimizer
from ._hyperparameters import LearningRateScaling
from ._pace import FixedPace, Pace
from ._schedule import LearningRateSchedule
from ._staleness import AsyncRemedies

FloatVector = npt.NDArray[np.float32]


@dataclass(frozen=True)
class Pushed:
    """One worker's gradient as the server applies it."""

    gradient: FloatVector
    micro_sq: float = 0.0  # its micro-batch gradients' squared norms, summed (AdaScale)
    staleness: int = 0  # updates applied since the weights it was computed on were sent
    pulled: FloatVector | None = None  # those weights (delay compensation needs them)
    loss_sum: float = 0.0  # its training loss, summed over its examples
    examples: int = 0


class ServerUpdates:
    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        pace: Pace,
        *,
        noise: GradientNoiseScale | None = None,
        remedies: AsyncRemedies | None = None,
        scaling: LearningRateScaling = LearningRateScaling.NONE,
    ) -> None:
        """`noise`: AdaScale's estimates (sync); `remedies`: what an asynchronous push's
        staleness changes (SGD's momentum only: Adam's is left; none by default);
        `scaling`: the rule that scales a round's learning rate with the gradients in it."""
        self._model = model
        self._optimizer = optimizer
        self._pace = pace
        self._noise = noise
        remedies = remedies or AsyncRemedies.none()
        self._compensation = remedies.compensation
        self._momentum = remedies.momentum
        self._restoration = remedies.restoration
        self._scaling = scaling
        self.version = 0
        self.progress = 0.0

    @classmethod
    def constant(
        cls, model: nn.Module, optimizer: torch.optim.Optimizer, lr: float
    ) -> ServerUpdates:
        """A fixed learning rate and nothing else (tests, and the simplest server)."""
        return cls(model, optimizer, FixedPace(LearningRateSchedule(lr, lr, 0), epochs=1))

    @property
    def keeps_pulled_weights(self) -> bool:
        return self._compensation.needs_pulled_weights

    def reached(self) -> int:
        """The last epoch of progress closed: AdaScale's, counted here; with a fixed pace
        the workers count epochs as their passes over the data, and this stays 0."""
        return self._pace.reached(self._position())

    @property
    def finished(self) -> bool:
        return self._pace.finished(self._position())

    def _position(self) -> Position:
        return self._pace.at(0, 0, self.version, self.progress)

    def metrics(self, updates_per_epoch: int) -> dict[str, float]:
        metrics = self._pace.metrics(self._position(), self._noise, updates_per_epoch)
        if self._noise is not None and self._noise.b_simple is not None:
            metrics["gns:b_simple"] = self._noise.b_simple
        return metrics

    def apply_round(self, pushes: list[Pushed], of: int | None = None) -> None:
        """A synchronous round: the mean of its gradients, in rank order. `of`: how many a
        whole round has; one that went on without its late workers (backup workers) counts
        in the job's progress as the share it applied, and its learning rate is the scaling
        rule's for the gradients it averaged (a smaller batch)."""
        mean = np.mean([p.gradient for p in pushes], axis=0) if len(pushes) > 1 else None
        gradient = pushes[0].gradient if mean is None else mean
        if self._noise is not None:
            averaged_sq = float(np.dot(gradient.astype(np.float64), gradient))
            summed = sum(p.micro_sq for p in pushes)
            self._noise.update(summed / self._noise.scale, averaged_sq)
        whole = of or len(pushes)
        lr_factor = self._scaling.factor(len(pushes)) / self._scaling.factor(whole)
        self._step(
            torch.from_numpy(np.asarray(gradient, dtype=np.float32)),
            lr_factor,
            applied=len(pushes) / whole,
        )

    def apply_push(self, push: Pushed) -> None:
        """An asynchronous push, compensated for its staleness."""
        gradient = torch.from_numpy(push.gradient)
        pulled = now = None
        if push.pulled is not None:  # kept only for a compensation that needs them
            pulled = torch.from_numpy(push.pulled)
            now = parameters_to_vector(self._model.parameters()).detach()
        gradient, lr_factor = self._compensation.compensate(gradient, push.staleness, now, pulled)
        if self._momentum is not None:
            explicit = self._momentum.explicit(push.staleness)
            for group in self._optimizer.param_groups:
                if "momentum" in group:
                    group["momentum"] = explicit
            if self._restoration is not None:
                lr_factor *= self._restoration.step_factor(
                    explicit, self._momentum.mean_staleness, push.loss_sum, push.examples
                )
        self._step(gradient, lr_factor)

    def _step(self, gradient: torch.Tensor, lr_factor: float, applied: float = 1.0) -> None:
        offset = 0
        for parameter in self._model.parameters():
            size = parameter.numel()
            parameter.grad = gradient[offset : offset + size].view_as(parameter).clone()
            offset += size
        scale = self._pace.scale(self.progress, self._noise)
        lr = self._pace.schedule.rate(self.progress, scale) * lr_factor
        for group in self._optimizer.param_groups:
            group["lr"] = lr
        self._optimizer.step()
        self.version += 1
        self.progress = self._pace.advance(self.progress, scale, applied)

    def state(self) -> dict[str, Any]:
        noise = self._noise
        return {
            "optimizer": self._optimizer.state_dict(),
            "version": self.version,
            "progress": self.progress,
            "noise": None if noise is None else noise.estimates,
            "compensation": self._compensation.state(),
            "mean_staleness": None if self._momentum is None else self._momentum.mean_staleness,
            "restoration": None if self._restoration is None else self._restoration.state(),
        }

    def restore(self, state: dict[str, Any]) -> None:
        restore_optimizer(self._optimizer, state["optimizer"])
        self.version = int(state["version"])
        self.progress = float(state.get("progress", self.version))
        if self._noise is not None:
            self._noise.restore(state.get("noise"))
        if state.get("compensation") is not None:
            self._compensation.restore(state["compensation"])
        if self._momentum is not None and state.get("mean_staleness") is not None:
            self._momentum.mean_staleness = float(state["mean_staleness"])
        if self._restoration is not None and state.get("restoration") is not None:
            self._restoration.restore(state["restoration"])
