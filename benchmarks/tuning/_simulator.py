"""One event loop for the peers: WORKERS trials at a time on the same curves and costs as
scaletune's simulated backend, each report delivered at its simulated moment; a peer's own
scheduler decides after each report whether the trial goes on."""

from __future__ import annotations

import heapq
from typing import Protocol

from benchmarks.tuning._problem import METRIC, Task
from scaletune.simulation import Curve

Trajectory = list[tuple[float, float]]  # (simulated seconds, reported value), in time order


class Policy(Protocol):
    def suggest(self) -> tuple[int, dict[str, object]]:
        """A new trial: its id and configuration."""
        ...

    def on_report(self, trial: int, epoch: int, value: float) -> bool:
        """True: the trial goes on."""
        ...

    def on_end(self, trial: int, epoch: int, value: float, stopped: bool) -> None: ...


def run_policy(policy: Policy, task: Task, workers: int) -> Trajectory:
    events: list[tuple[float, int, int]] = []  # (moment, order, trial)
    trials: dict[int, tuple[Curve, float, int]] = {}  # trial -> (curve, started, next point)
    order = 0
    trajectory: Trajectory = []

    def start(now: float) -> None:
        nonlocal order
        trial, config = policy.suggest()
        curve = task.curve(config)
        trials[trial] = (curve, now, 0)
        heapq.heappush(events, (now + curve.points[0].seconds, order, trial))
        order += 1

    for _ in range(workers):
        start(0.0)
    while events:
        now, _, trial = heapq.heappop(events)
        if now > task.budget_seconds:
            break
        curve, started, index = trials[trial]
        point = curve.points[index]
        value = point.metrics[METRIC]
        trajectory.append((now, value))
        goes_on = policy.on_report(trial, point.step, value)
        if goes_on and index + 1 < len(curve.points):
            trials[trial] = (curve, started, index + 1)
            heapq.heappush(events, (started + curve.points[index + 1].seconds, order, trial))
            order += 1
            continue
        policy.on_end(trial, point.step, value, stopped=not goes_on)
        del trials[trial]
        start(now)
    return trajectory
