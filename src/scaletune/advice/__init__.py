"""Cluster-size advice: from a finished job's measured speed (and, optionally, short probes
on other sizes), the predicted time and billable cost of reaching its quality on 1..N
workers, and the size to choose. Pure over the store's records; the probes are run by the
CLI as ordinary jobs."""

from scaletune.advice._advise import advise_job, probe_spec
from scaletune.advice._measure import (
    RunMeasure,
    first_reaching,
    lower_is_better,
    measure_run,
    start_seconds,
)
from scaletune.advice._predict import (
    Advice,
    OverheadModel,
    SizePrediction,
    StepTimeModel,
    predict,
)
from scaletune.advice._spot import (
    JobShape,
    Mix,
    MixPrediction,
    Preemption,
    SpotAdvice,
    SpotMarket,
    predict_mixes,
    simulate,
)

__all__ = [
    "Advice",
    "JobShape",
    "Mix",
    "MixPrediction",
    "OverheadModel",
    "Preemption",
    "RunMeasure",
    "SizePrediction",
    "SpotAdvice",
    "SpotMarket",
    "StepTimeModel",
    "advise_job",
    "first_reaching",
    "lower_is_better",
    "measure_run",
    "predict",
    "predict_mixes",
    "probe_spec",
    "simulate",
    "start_seconds",
]
