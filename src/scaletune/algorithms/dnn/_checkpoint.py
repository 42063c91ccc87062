"""What a DNN checkpoint holds, and where in the data a resumed attempt picks up.

A step is an optimiser update. The batch order is a function of (seed, epoch, rank), so the
position in the shuffled order is (epoch, updates done in it): a resumed attempt skips that
many updates of the epoch's order and goes on with the same batches an uninterrupted run
would (an elastic job's position counts rows instead, the same at any size). Rank 0 saves;
what differs per rank (its share of the epoch's loss, its gradient-noise estimates and the
squared norms it measured since the last, its RNG)
is gathered into the same file."""

from __future__ import annotations

import io
from dataclasses import dataclass
from typing import Any

import torch

from scaletune.gradient_noise import GradientNoiseScale, NormPool

STATE_FILE = "state.pt"


@dataclass(frozen=True)
class Position:
    epoch: int  # the epoch under way (1-based)
    index: int  # updates already done in it
    update: int  # updates done in all
    progress: float | None = None  # with AdaScale, one worker's updates made (`_pace`)
    examples: int | None = None  # an elastic job's: rows of the epoch taken (`_elastic_plan`)

    @classmethod
    def start(cls) -> Position:
        return cls(epoch=1, index=0, update=0)

    @property
    def progress_or_update(self) -> float:
        return float(self.update) if self.progress is None else self.progress


def pack(state: dict[str, Any]) -> bytes:
    buffer = io.BytesIO()
    torch.save(state, buffer)
    return buffer.getvalue()


def unpack(content: bytes) -> dict[str, Any]:
    # weights_only=False: the file holds plain Python values beside tensors; it is one this
    # job wrote, read back only after its digest matched the manifest.
    state = torch.load(io.BytesIO(content), map_location="cpu", weights_only=False)
    assert isinstance(state, dict)
    return state


def rank_state(
    tally_total: float,
    tally_examples: int,
    noise: GradientNoiseScale | None,
    pooled: NormPool | None = None,
) -> dict[str, Any]:
    """This rank's part of a checkpoint."""
    return {
        "loss_total": tally_total,
        "loss_examples": tally_examples,
        "noise": None if noise is None else noise.estimates,
        "pooled": None if pooled is None else pooled.state,  # measured, not yet estimated
        "torch_rng": torch.get_rng_state(),
    }
