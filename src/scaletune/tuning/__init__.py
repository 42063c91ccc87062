"""Automatic model tuning: searchers that propose, schedulers that stop early, the tuner that
runs trials. What a tuning job's records say afterwards is `scaletune.analysis`'s.

Names load on first use: `scaletune.tuning.notices` does not load the tuner, Optuna or the
training stack."""

from typing import TYPE_CHECKING

from scaletune._lazy import lazy_names

if TYPE_CHECKING:
    from scaletune.tuning._hyperband import (
        HyperbandScheduler,
        PromotionHyperband,
        StoppingHyperband,
        hyperband_scheduler,
    )
    from scaletune.tuning._notices import notices
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
        TrialResult,
        bayesian_searcher,
        random_searcher,
    )
    from scaletune.tuning._strategy import make_scheduler, make_searcher
    from scaletune.tuning._tally import TuningProgress
    from scaletune.tuning._tuner import TuningController

__getattr__ = lazy_names(__name__)
__all__ = [
    "Decision",
    "FIFOScheduler",
    "GridSearcher",
    "HyperbandScheduler",
    "MedianStoppingScheduler",
    "OptunaSearcher",
    "PromotionHyperband",
    "Scheduler",
    "Searcher",
    "StoppingHyperband",
    "Suggestion",
    "TrialResult",
    "TuningController",
    "TuningProgress",
    "Verdict",
    "bayesian_searcher",
    "hyperband_scheduler",
    "make_scheduler",
    "make_searcher",
    "notices",
    "random_searcher",
]
