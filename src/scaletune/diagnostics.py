"""Plain-language readings of what a finished job measured about its own convergence."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # a type alias only: reading a job needs none of the spec models
    from scaletune.spec import HyperparameterValue

GNS_METRIC = "gns:b_simple"


def critical_batch_advice(
    final_metrics: Mapping[str, float],
    hyperparameters: Mapping[str, HyperparameterValue],
    default_batch_size: int = 64,
) -> str | None:
    """From the gradient noise scale (McCandlish et al. 2018): batches much larger than
    B_simple buy little more progress per step, so more workers than B_simple / b (per-worker
    batch b) mostly add cost. None where the job did not measure it (one worker, not a DNN)."""
    critical = final_metrics.get(GNS_METRIC)
    if critical is None:
        return None
    batch = hyperparameters.get("batch_size", default_batch_size)
    accumulate = hyperparameters.get("gradient_accumulation_steps", 1)
    if not isinstance(batch, int) or not isinstance(accumulate, int):
        return None
    per_worker = batch * accumulate
    workers = critical / per_worker
    return (
        f"critical batch ≈ {critical:.0f}; at per-worker batch {per_worker} the useful "
        f"cluster size is about {workers:.1f} worker{'s' if round(workers, 1) != 1 else ''}"
    )
