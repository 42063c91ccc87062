"""Run a whole tuning job in simulated time: the real tuning loop over a curve source."""

from __future__ import annotations

from scaletune.simulation._clock import SimulatedClock
from scaletune.simulation._curves import CurveSource
from scaletune.simulation._runner import SimulatedTrialRunner
from scaletune.spec import TuningJobSpec
from scaletune.store import Store, TuningJobRecord
from scaletune.tuning import TuningController

# How often (in simulated seconds) the loop looks for a stop request: a simulated minute
# passes in a fraction of a real second, and a store read per report would be most of the
# simulation's cost.
STOP_POLL_SECONDS = 60.0


def simulate_tuning(
    spec: TuningJobSpec,
    source: CurveSource,
    store: Store,
    *,
    start_time: float = 0.0,
    capacity_workers: int | None = None,
) -> TuningJobRecord:
    """Create and run the tuning job; its records (trials, metrics, times, billing) land in
    `store` exactly as a real run's would, with times on the simulated clock."""
    clock = SimulatedClock(start_time)
    runner = SimulatedTrialRunner(
        store,
        source,
        clock,
        capacity_workers=capacity_workers,
        horizon_seconds=spec.max_runtime_seconds,
    )
    tuner = TuningController(runner, clock=clock, poll_seconds=STOP_POLL_SECONDS)
    return tuner.run(tuner.create(spec), spec)
