"""Automatic model tuning: ranges, searchers that propose, schedulers that stop early."""

from scaletune.tuning._hyperband import HyperbandScheduler
from scaletune.tuning._ranges import (
    CategoricalRange,
    ContinuousRange,
    IntegerRange,
    ParameterRange,
    Scaling,
)
from scaletune.tuning._schedulers import (
    Decision,
    FIFOScheduler,
    MedianStoppingScheduler,
    Scheduler,
    Verdict,
)
from scaletune.tuning._searchers import (
    GridSearcher,
    ObjectiveType,
    OptunaSearcher,
    Range,
    Searcher,
    Suggestion,
    bayesian_searcher,
    random_searcher,
)

__all__ = [
    "CategoricalRange",
    "ContinuousRange",
    "Decision",
    "FIFOScheduler",
    "GridSearcher",
    "HyperbandScheduler",
    "IntegerRange",
    "MedianStoppingScheduler",
    "ObjectiveType",
    "OptunaSearcher",
    "ParameterRange",
    "Range",
    "Scaling",
    "Scheduler",
    "Searcher",
    "Suggestion",
    "Verdict",
    "bayesian_searcher",
    "random_searcher",
]
