"""Automatic model tuning: ranges, searchers that propose, schedulers that stop early.

Names load on first use: reading a tuning job's summary does not load the tuner, Optuna or
the training stack."""

from typing import TYPE_CHECKING

from scaletune._lazy import lazy_names

if TYPE_CHECKING:
    from scaletune.tuning._brackets import hyperband_brackets
    from scaletune.tuning._hyperband import (
        HyperbandScheduler,
        PromotionHyperband,
        StoppingHyperband,
        hyperband_scheduler,
    )
    from scaletune.tuning._notices import notices
    from scaletune.tuning._rungs import RungAgreement, RungReport, rung_agreement
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
    from scaletune.tuning._summary import (
        ANALYTICS_COLUMNS,
        TrialMarks,
        TuningSummary,
        analytics_dataframe,
        analytics_rows,
        summarize,
        trial_marks,
    )
    from scaletune.tuning._tally import TuningProgress
    from scaletune.tuning._tradeoffs import TargetView, TradeOff, front_of, target_view
    from scaletune.tuning._tuner import TuningController

_WHERE = {
    "HyperbandScheduler": "_hyperband",
    "PromotionHyperband": "_hyperband",
    "StoppingHyperband": "_hyperband",
    "hyperband_scheduler": "_hyperband",
    "hyperband_brackets": "_brackets",
    "notices": "_notices",
    "RungAgreement": "_rungs",
    "RungReport": "_rungs",
    "rung_agreement": "_rungs",
    "Decision": "_schedulers",
    "FIFOScheduler": "_schedulers",
    "MedianStoppingScheduler": "_schedulers",
    "Scheduler": "_schedulers",
    "Verdict": "_schedulers",
    "GridSearcher": "_searchers",
    "OptunaSearcher": "_searchers",
    "Searcher": "_searchers",
    "Suggestion": "_searchers",
    "TrialResult": "_searchers",
    "bayesian_searcher": "_searchers",
    "random_searcher": "_searchers",
    "make_scheduler": "_strategy",
    "make_searcher": "_strategy",
    "ANALYTICS_COLUMNS": "_summary",
    "TuningSummary": "_summary",
    "analytics_dataframe": "_summary",
    "analytics_rows": "_summary",
    "summarize": "_summary",
    "TrialMarks": "_summary",
    "trial_marks": "_summary",
    "TargetView": "_tradeoffs",
    "TradeOff": "_tradeoffs",
    "front_of": "_tradeoffs",
    "target_view": "_tradeoffs",
    "TuningController": "_tuner",
    "TuningProgress": "_tally",
}
__getattr__ = lazy_names(__name__, _WHERE)
__all__ = [
    "ANALYTICS_COLUMNS",
    "Decision",
    "FIFOScheduler",
    "GridSearcher",
    "HyperbandScheduler",
    "MedianStoppingScheduler",
    "OptunaSearcher",
    "PromotionHyperband",
    "RungAgreement",
    "RungReport",
    "Scheduler",
    "Searcher",
    "StoppingHyperband",
    "Suggestion",
    "TargetView",
    "TradeOff",
    "TrialMarks",
    "TrialResult",
    "TuningController",
    "TuningProgress",
    "TuningSummary",
    "Verdict",
    "analytics_dataframe",
    "analytics_rows",
    "bayesian_searcher",
    "front_of",
    "hyperband_brackets",
    "hyperband_scheduler",
    "make_scheduler",
    "make_searcher",
    "notices",
    "random_searcher",
    "rung_agreement",
    "summarize",
    "target_view",
    "trial_marks",
]
