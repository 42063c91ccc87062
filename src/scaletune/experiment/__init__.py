"""The convergence experiment (REFERENCE.md section 2) end to end, and its reports."""

from scaletune.experiment._convergence_report import convergence_report
from scaletune.experiment._plans import ExperimentPlan, ReferenceFigures, plan_for
from scaletune.experiment._report import Report
from scaletune.experiment._runner import (
    ExperimentProgress,
    ExperimentResult,
    StaticRun,
    TuningRun,
    run_convergence,
)
from scaletune.experiment._tuning_report import (
    CapacityBilling,
    drawn_curves,
    stored_tuning_report,
    tuning_job_report,
)

__all__ = [
    "CapacityBilling",
    "ExperimentPlan",
    "ExperimentProgress",
    "ExperimentResult",
    "ReferenceFigures",
    "Report",
    "StaticRun",
    "TuningRun",
    "convergence_report",
    "drawn_curves",
    "plan_for",
    "run_convergence",
    "stored_tuning_report",
    "tuning_job_report",
]
