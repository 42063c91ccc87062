"""Ray nodes being drained: `ray drain-node` with a deadline, or Ray's autoscaler before it
ends a preempted node. A drained node takes no new work and goes at its deadline: its
workers are told (a notice), and its room is not counted as free. Read from Ray's developer
API (`ray._private.state`, as Ray Data and Serve read it)."""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable
from typing import Any

CHECK_SECONDS = 0.5  # how stale the drained nodes may be: one read of the GCS per period


class DrainedNodes:
    """Which nodes are draining, and the seconds left to each (None: no deadline)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._state: Any = importlib.import_module("ray._private.state").state
        self._clock = clock
        self._read_at = -float("inf")
        self._draining: dict[str, float | None] = {}

    def now(self) -> dict[str, float | None]:
        """Node id (hex) -> seconds until it goes, None without a deadline."""
        if self._clock() - self._read_at < CHECK_SECONDS:
            return self._draining
        self._read_at = self._clock()
        try:
            deadlines: dict[str, int] = self._state.get_draining_nodes()
        except Exception:  # the GCS briefly away: the next read asks again
            return self._draining
        wall_ms = time.time() * 1000
        self._draining = {
            node: None if at_ms == 0 else max(at_ms - wall_ms, 0.0) / 1000
            for node, at_ms in deadlines.items()
        }
        return self._draining

    def per_node(self) -> dict[str, dict[str, float]]:
        """Free resources on each node not draining."""
        draining = self.now()
        per_node: dict[str, dict[str, float]] = self._state.available_resources_per_node()
        return {node: dict(free) for node, free in per_node.items() if node not in draining}

    def available(self, fallback: dict[str, float]) -> dict[str, float]:
        """Free resources on the nodes not draining (`fallback`, Ray's total, without the
        per-node view)."""
        draining = self.now()
        if not draining:
            return fallback
        try:
            per_node: dict[str, dict[str, float]] = self._state.available_resources_per_node()
        except Exception:
            return fallback
        total: dict[str, float] = {}
        for node, resources in per_node.items():
            if node in draining:
                continue
            for key, value in resources.items():
                total[key] = total.get(key, 0.0) + value
        return total
