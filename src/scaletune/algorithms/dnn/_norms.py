"""The squared norms the gradient noise estimates need, measured beside training.

A hook on each parameter sees the gradient of one backward pass before it is accumulated into
`.grad` (and, under DDP, before it is all-reduced): the gradient of one micro-batch on this
worker. The averaged gradient is `.grad` after the last micro-batch's backward, the same on
every rank. So a measurement costs one squared norm per micro-batch and one of `.grad`, plus,
with several workers, one all-reduce of a single number; DDP's overlap of communication with
the backward pass is kept."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.hooks import RemovableHandle


class MicroBatchNorms:
    def __init__(self, model: nn.Module, micro_batches: int) -> None:
        self.active = False
        # Each micro-batch's loss is divided by their count, so that their gradients sum to
        # the mean: its own gradient is m times what the hook sees.
        self._scale = float(micro_batches) ** 2
        self._sum = torch.zeros((), dtype=torch.float64)
        self._parameters = [p for p in model.parameters() if p.requires_grad]
        self._handles: list[RemovableHandle] = [
            p.register_hook(self._add)  # type: ignore[no-untyped-call]  # untyped in torch
            for p in self._parameters
        ]

    def _add(self, grad: torch.Tensor) -> None:
        if self.active:
            self._sum += grad.detach().double().pow(2).sum().cpu()

    def take(self) -> tuple[float, float]:
        """This worker's micro-batch gradients' squared norms summed, and the averaged
        gradient's squared norm; the sum starts again from zero."""
        local = float(self._sum) * self._scale
        self._sum.zero_()
        averaged = sum(
            float(p.grad.detach().double().pow(2).sum())
            for p in self._parameters
            if p.grad is not None
        )
        return local, averaged

    def close(self) -> None:
        for handle in self._handles:
            handle.remove()
