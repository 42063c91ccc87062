"""The top-K baseline of Egele et al. (2023, "Is one epoch all you need for multi-fidelity
hyperparameter optimization?"): random configurations screened at the first rung, then the
best of them trained to the end, best first. A learning-curve-free anchor: a method that
cannot beat it gains nothing from what it models."""

from __future__ import annotations

import numpy as np

from benchmarks.tuning._problem import EPOCHS, MIN_RESOURCE, Task, random_config

SCREENING_SHARE = 0.5  # of the budget's worker time, spent at the first rung


class TopKPolicy:
    """Half the budget's worker time screens random configurations to MIN_RESOURCE epochs
    (as many as the median time to get there allows); the rest trains the screened ones
    from scratch to the end, in the order of their first-rung values, until the budget ends.
    K is what the budget leaves room for."""

    def __init__(self, seed: int, task: Task) -> None:
        self.rng = np.random.default_rng(seed)  # as RayPolicy draws
        worker_seconds = SCREENING_SHARE * task.budget_seconds * task.setting.workers
        self.screen = max(1, int(worker_seconds / task.first_rung_seconds))
        self.configs: dict[int, dict[str, object]] = {}
        self.screened: list[tuple[float, int]] = []  # (value at the first rung, trial)
        self.trained: set[int] = set()

    def suggest(self) -> tuple[int, dict[str, object]]:
        number = len(self.configs)
        if number < self.screen or not self.screened:  # still screening, or none to train yet
            self.configs[number] = random_config(self.rng)
            return number, self.configs[number]
        self.screened.sort()
        _, best = self.screened.pop()
        self.configs[number] = self.configs[best]
        self.trained.add(number)
        return number, self.configs[number]

    def on_report(self, trial: int, epoch: int, value: float) -> bool:
        if trial in self.trained:
            return epoch < EPOCHS
        if epoch >= MIN_RESOURCE:
            self.screened.append((value, trial))
            return False
        return True

    def on_end(self, trial: int, epoch: int, value: float, stopped: bool) -> None:
        return None
