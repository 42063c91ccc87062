"""Tuning in simulated time: trials follow learning curves (a surrogate's, or those a stored
tuning job recorded) on a simulated clock, driven by the real tuning loop, searchers and
schedulers. Nothing sleeps, so strategies can be compared over many tasks and seeds."""

from scaletune.simulation._clock import SimulatedClock
from scaletune.simulation._curves import ClusterCosts, Curve, CurvePoint, CurveSource
from scaletune.simulation._lcbench import LCBenchSurrogate
from scaletune.simulation._replay import ReplaySource, replay_tuning
from scaletune.simulation._runner import SimulatedTrialRunner
from scaletune.simulation._simulate import simulate_tuning

__all__ = [
    "ClusterCosts",
    "Curve",
    "CurvePoint",
    "CurveSource",
    "LCBenchSurrogate",
    "ReplaySource",
    "SimulatedClock",
    "SimulatedTrialRunner",
    "replay_tuning",
    "simulate_tuning",
]
