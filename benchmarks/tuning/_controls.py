"""A control: scaletune's Hyperband scheduler on exactly the random draws Ray Tune's policies
get (same seed, same generator), in the peers' event loop. Against Ray Tune's ASHA and async
HyperBand it isolates the scheduler; against scaletune's own Hyperband, the draws."""

from __future__ import annotations

import numpy as np

from benchmarks.tuning._problem import EPOCHS, random_config
from scaletune.spec import ObjectiveType
from scaletune.tuning import Decision, HyperbandScheduler


class HyperbandOnRayDraws:
    def __init__(self, seed: int) -> None:
        self.scheduler = HyperbandScheduler(
            ObjectiveType.MAXIMIZE, min_resource=1, max_resource=EPOCHS, seed=seed
        )
        self.rng = np.random.default_rng(seed)  # as RayPolicy draws
        self.count = 0

    def suggest(self) -> tuple[int, dict[str, object]]:
        self.count += 1
        return self.count - 1, random_config(self.rng)

    def on_report(self, trial: int, epoch: int, value: float) -> bool:
        return self.scheduler.on_report(trial, epoch, value).decision is Decision.CONTINUE

    def on_end(self, trial: int, epoch: int, value: float, stopped: bool) -> None:
        self.scheduler.on_end(trial)
