"""What a tuning job's records say: its summary and analytics, its trade-offs (Pareto front,
target view) and how well its rungs agree with the end; and the rules the tuner shares with
them (goals and costs, Pareto fronts, forecasts, Hyperband's bracket layout).

Read-only and light: it imports the store and the spec's names, never the tuner, Optuna or
pydantic, so a command or page that reads a tuning job loads no more than this."""

from scaletune.analysis._forecast import forecast
from scaletune.analysis._kendall import kendall_tau
from scaletune.analysis._layout import draw_bracket, hyperband_brackets
from scaletune.analysis._objectives import Goals, TrialCosts
from scaletune.analysis._pareto import pareto_front
from scaletune.analysis._rungs import RungAgreement, RungReport, rung_agreement
from scaletune.analysis._summary import (
    ANALYTICS_COLUMNS,
    TrialMarks,
    TuningSummary,
    analytics_dataframe,
    analytics_rows,
    summarize,
    trial_marks,
)
from scaletune.analysis._tradeoffs import TargetView, TradeOff, front_of, target_view
from scaletune.analysis._values import best_so_far, tuned_value

__all__ = [
    "ANALYTICS_COLUMNS",
    "Goals",
    "RungAgreement",
    "RungReport",
    "TargetView",
    "TradeOff",
    "TrialCosts",
    "TrialMarks",
    "TuningSummary",
    "analytics_dataframe",
    "analytics_rows",
    "best_so_far",
    "draw_bracket",
    "forecast",
    "front_of",
    "hyperband_brackets",
    "kendall_tau",
    "pareto_front",
    "rung_agreement",
    "summarize",
    "target_view",
    "trial_marks",
    "tuned_value",
]
