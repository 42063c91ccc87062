"""scaletune's Hyperband scheduler as a policy of the peers' event loop. The control draws
exactly the random configurations Ray Tune's policies get (same seed, same generator): against
Ray Tune's ASHA and async HyperBand it isolates the scheduler; against scaletune's own
Hyperband, the draws."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from benchmarks.tuning._problem import EPOCHS, MIN_RESOURCE, random_config
from scaletune.spec import ObjectiveType
from scaletune.tuning import Decision, hyperband_scheduler

Draw = Callable[[np.random.Generator], dict[str, object]]


class HyperbandPolicy:
    def __init__(
        self,
        seed: int,
        *,
        max_resource: int = EPOCHS,
        draw: Draw = random_config,
        brackets: int | None = None,  # None: all of Hyperband's
    ):
        self.scheduler = hyperband_scheduler(
            ObjectiveType.MAXIMIZE,
            min_resource=MIN_RESOURCE,
            max_resource=max_resource,
            seed=seed,
            brackets=brackets,
        )
        self.rng = np.random.default_rng(seed)  # as RayPolicy draws
        self.draw = draw
        self.count = 0

    def suggest(self) -> tuple[int, dict[str, object]]:
        self.count += 1
        return self.count - 1, self.draw(self.rng)

    def on_report(self, trial: int, epoch: int, value: float) -> bool:
        return self.scheduler.on_report(trial, epoch, value).decision is Decision.CONTINUE

    def on_end(self, trial: int, epoch: int, value: float, stopped: bool) -> None:
        self.scheduler.on_end(trial)
