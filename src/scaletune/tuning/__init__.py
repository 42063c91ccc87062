"""Automatic model tuning: ranges, searchers that propose, schedulers that stop early."""

from scaletune.tuning._hyperband import HyperbandScheduler
from scaletune.tuning._schedulers import (
    Decision,
    FIFOScheduler,
    MedianStoppingScheduler,
    Scheduler,
    Verdict,
)
from scaletune.tuning._searchers import (
    GridSearcher,
    OptunaSearcher,
    Searcher,
    Suggestion,
    bayesian_searcher,
    random_searcher,
)
from scaletune.tuning._strategy import make_scheduler, make_searcher
from scaletune.tuning._summary import TuningSummary, analytics_dataframe, summarize
from scaletune.tuning._tuner import TuningController, TuningProgress

__all__ = [
    "Decision",
    "FIFOScheduler",
    "GridSearcher",
    "HyperbandScheduler",
    "MedianStoppingScheduler",
    "OptunaSearcher",
    "Scheduler",
    "Searcher",
    "Suggestion",
    "TuningController",
    "TuningProgress",
    "TuningSummary",
    "Verdict",
    "analytics_dataframe",
    "bayesian_searcher",
    "make_scheduler",
    "make_searcher",
    "random_searcher",
    "summarize",
]
