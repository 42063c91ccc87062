"""From measured runs to the time and billable cost of reaching a job's quality on 1..N
workers, and the size to choose.

Time per step on n workers: t(n) = serial + parallel / n + exchange * (n - 1). The parallel
part is the work the workers share (their rows), the serial part does not shrink (fixed
costs per step), and the exchange part grows with every worker added (a collective's
latency per peer, machines' cores shared by more processes). One measured size cannot tell
them apart and is read as all parallel (the best case); two sizes fit the parallel and the
exchange parts; three or more fit all three (non-negative least squares: the subset of
terms with non-negative coefficients that fits best). The time outside steps (start-up,
loading, saving) is a + b n over the measured sizes (b at 0 or above: processes to start per
worker; one size: the same on every size).

Steps to reach the quality: the same on every size for XGBoost (its histograms are summed
over all workers, so a round is the same round), and, for the data-parallel classifier with
a gradient noise scale B_noise, McCandlish et al. (2018): epochs E(B) = E_min (1 + B / B_noise)
for a global batch B (n workers x per-worker batch), so E(n) = E(n0) (1 + n b / B_noise) /
(1 + n0 b / B_noise). That assumes the learning rate follows the batch (lr_scaling); with a
fixed learning rate the quality may not be reached at all on other sizes, which the
convergence experiment shows.

The recommendation: the fastest size whose billable cost is within `max_cost_ratio` of the
cheapest size's; as an elastic range, from the smallest size below it that still is, so that
every size the job may shrink to stays within that cost."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from scaletune.advice._measure import RunMeasure
from scaletune.advice._spot import SpotAdvice


@dataclass(frozen=True)
class StepTimeModel:
    serial: float
    parallel: float
    exchange: float = 0.0

    @classmethod
    def fit(cls, measures: Sequence[RunMeasure]) -> StepTimeModel:
        sizes = np.array([m.workers for m in measures], dtype=float)
        times = np.array([m.step_seconds for m in measures])
        distinct = len(set(sizes.tolist()))
        terms = {
            "serial": np.ones_like(sizes),
            "parallel": 1.0 / sizes,
            "exchange": sizes - 1.0,
        }
        allowed = {1: ["parallel"], 2: ["parallel", "exchange"]}.get(distinct, list(terms))
        best: tuple[float, dict[str, float]] | None = None
        for count in range(1, len(allowed) + 1):
            for names in itertools.combinations(allowed, count):
                basis = np.column_stack([terms[name] for name in names])
                coefficients = np.linalg.lstsq(basis, times, rcond=None)[0]
                if (coefficients < 0).any():
                    continue
                residual = float(((basis @ coefficients - times) ** 2).sum())
                if best is None or residual < best[0] - 1e-15:
                    best = (residual, dict(zip(names, coefficients.tolist(), strict=True)))
        fitted = best[1] if best is not None else {"serial": float(times.mean())}
        return cls(
            fitted.get("serial", 0.0), fitted.get("parallel", 0.0), fitted.get("exchange", 0.0)
        )

    def at(self, workers: int) -> float:
        return self.serial + self.parallel / workers + self.exchange * (workers - 1)

    def describe(self) -> str:
        return (
            f"{self.serial:.3g} s + {self.parallel:.3g} s / workers "
            f"+ {self.exchange:.3g} s x (workers - 1) per step"
        )


@dataclass(frozen=True)
class OverheadModel:
    """Seconds outside steps on n workers: fixed + per_worker x n."""

    fixed: float
    per_worker: float = 0.0

    @classmethod
    def fit(cls, measures: Sequence[RunMeasure]) -> OverheadModel:
        sizes = np.array([m.workers for m in measures], dtype=float)
        seconds = np.array([m.overhead_seconds for m in measures])
        if len(set(sizes.tolist())) == 1:
            return cls(float(seconds.mean()))
        slope, intercept = np.polyfit(sizes, seconds, 1)
        if slope <= 0:
            return cls(float(seconds.mean()))
        return cls(float(intercept), float(slope))

    def at(self, workers: int) -> float:
        return max(0.0, self.fixed + self.per_worker * workers)

    def describe(self) -> str:
        if self.per_worker == 0:
            return f"{self.fixed:.3g} s on every size"
        return f"{self.fixed:.3g} s + {self.per_worker:.3g} s x workers"


@dataclass(frozen=True)
class SizePrediction:
    workers: int
    steps: float  # steps to reach the quality
    step_seconds: float
    wall_seconds: float
    billable_seconds: float
    measured: bool  # a run on this size was measured (the job or a probe)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "instance_count": self.workers,
            "steps": self.steps,
            "step_seconds": self.step_seconds,
            "wall_seconds": self.wall_seconds,
            "billable_seconds": self.billable_seconds,
            "measured_size": self.measured,
        }


@dataclass(frozen=True)
class Advice:
    job_id: str
    metric: str
    quality: float  # the job's final value of `metric`, the one to reach
    steps_to_quality: int  # on the job's own size
    predictions: list[SizePrediction]
    recommended: int
    max_cost_ratio: float
    elastic_range: tuple[int, int]  # (min, max): every size in it within the cost ratio
    basis: list[str] = field(default_factory=list)  # what was measured, what assumed
    probes: list[str] = field(default_factory=list)  # the probe jobs run for it
    spot: SpotAdvice | None = None  # what it would cost on spot capacity, if asked

    def prediction(self, workers: int) -> SizePrediction:
        return next(p for p in self.predictions if p.workers == workers)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "training_job": self.job_id,
            "metric": self.metric,
            "quality": self.quality,
            "steps_to_quality": self.steps_to_quality,
            "recommended_instance_count": self.recommended,
            "recommended_elastic_range": dict(zip(("min", "max"), self.elastic_range, strict=True)),
            "max_cost_ratio": self.max_cost_ratio,
            "predictions": [p.to_json_dict() for p in self.predictions],
            "basis": self.basis,
            "probes": self.probes,
            "spot": None if self.spot is None else self.spot.to_json_dict(),
        }


def predict(
    base: RunMeasure,
    steps_to_quality: int,
    probes: Sequence[RunMeasure] = (),
    *,
    max_workers: int,
    extra_tasks: int = 0,
    noise_scale: float | None = None,
    per_worker_batch: int | None = None,
    max_cost_ratio: float = 1.5,
) -> tuple[list[SizePrediction], int, list[str]]:
    """Predictions on 1..max_workers, the recommended size, and the basis in words."""
    measures = [base, *probes]
    model = StepTimeModel.fit(measures)
    overhead = OverheadModel.fit(measures)
    basis = [
        f"step time {base.step_seconds:.3g} s on {base.workers} worker(s)"
        + "".join(
            f", {p.step_seconds:.3g} s on {p.workers} "
            + ("(the same run, resized)" if p.job_id == base.job_id else "(probe)")
            for p in probes
        ),
        f"fitted: {model.describe()}"
        + ("" if probes else " (one size measured: read as all parallel, the best case)"),
        f"outside steps: {overhead.describe()}",
    ]
    scale_steps = noise_scale is not None and per_worker_batch is not None
    if scale_steps:
        basis.append(
            f"steps scaled by the gradient noise scale B_noise ≈ {noise_scale:.0f} at "
            f"per-worker batch {per_worker_batch} (assumes the learning rate follows the batch)"
        )
    else:
        basis.append("the same number of steps on every size")
    predictions = []
    for workers in range(1, max_workers + 1):
        steps = float(steps_to_quality)
        if scale_steps:
            assert noise_scale is not None and per_worker_batch is not None
            steps *= (1 + workers * per_worker_batch / noise_scale) / (
                1 + base.workers * per_worker_batch / noise_scale
            )
        step = model.at(workers)
        wall = overhead.at(workers) + steps * step
        predictions.append(
            SizePrediction(
                workers=workers,
                steps=steps,
                step_seconds=step,
                wall_seconds=wall,
                billable_seconds=(workers + extra_tasks) * wall,
                measured=any(m.workers == workers for m in measures),
            )
        )
    cheapest = min(p.billable_seconds for p in predictions)
    affordable = [p for p in predictions if p.billable_seconds <= max_cost_ratio * cheapest]
    recommended = min(affordable, key=lambda p: (p.wall_seconds, p.workers)).workers
    basis.append(
        f"recommended: the fastest size within {max_cost_ratio:g}x the cheapest's billable cost"
    )
    return predictions, recommended, basis


def elastic_range(
    predictions: Sequence[SizePrediction], recommended: int, max_cost_ratio: float
) -> tuple[int, int]:
    """The recommended size as the most of an elastic range whose least is the smallest size
    below it with every size between within `max_cost_ratio` of the cheapest's cost."""
    cheapest = min(p.billable_seconds for p in predictions)
    by_size = {p.workers: p for p in predictions}
    least = recommended
    while least - 1 in by_size and by_size[least - 1].billable_seconds <= max_cost_ratio * cheapest:
        least -= 1
    return least, recommended
