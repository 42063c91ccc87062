"""What gradient-boosting algorithms share on the controller's side: label checks, and the note
on Hyperband's first rung."""

from __future__ import annotations

import numpy as np

from scaletune.data import Table
from scaletune.spec import ChannelName, Strategy, TuningJobSpec
from scaletune.spec._names import FORECAST_MIN_REPORTS, bracket_rungs, forecasts_later

# Metrics that depend only on the order of the scores. A boosted model's first tree does not
# depend on its learning rate, which only scales that tree's scores: at round 1 these metrics
# are the same for every rate (tests/tuning/test_notices.py checks it on XGBoost itself).
ORDER_METRICS = ("auc", "aucpr", "average_precision")


def refuse_labels(
    name: ChannelName, table: Table, bad: np.ndarray, wanted: str, objective: str
) -> None:
    """One line naming the first row whose label the objective cannot take, if any."""
    from scaletune.errors import InvalidInputError

    if bad.any():
        row = int(np.argmax(bad))
        raise InvalidInputError(
            f"channel {name.value!r} ({table.source}) row {row + 1} has label "
            f"{float(table.labels[row])!r}, not {wanted} as objective {objective!r} needs"
        )


def first_rung_notice(spec: TuningJobSpec, learning_rate: str) -> list[str]:
    """Hyperband ranking its trials at round 1 on an order metric, with the learning rate
    (`learning_rate`, by its name) among the ranges: the rung cannot tell rates apart."""
    hyperband = spec.hyperband
    metric = spec.objective_metric.rsplit(":", 1)[-1]
    if (
        spec.strategy is Strategy.HYPERBAND
        and hyperband is not None
        and hyperband.min_resource == 1
        # values ranked at round 1: asked for, or no later rung of its bracket will forecast
        and (
            spec.hyperband_rank_by == "value"
            or not forecasts_later(bracket_rungs(1, hyperband.max_resource, hyperband.eta)[1:])
        )
        and metric in ORDER_METRICS
        and learning_rate in spec.ranges
    ):
        forecast = (
            f"no rung after round 1 below max_resource = {hyperband.max_resource} has the "
            f"{FORECAST_MIN_REPORTS} reports a forecast needs"
            if spec.hyperband_rank_by == "forecast"
            else f'hyperband.rank_by = "forecast" ranks where curves point, from '
            f"{FORECAST_MIN_REPORTS} reports on"
        )
        return [
            f"note: Hyperband's first rung is round 1, where {spec.objective_metric} is the "
            f"same for every {learning_rate} (the first tree does not depend on it): the rung "
            "ranks trials by their other settings alone; hyperband.min_resource = 2 or more "
            f"lets {learning_rate} count; {forecast} (`scaletune tuning rungs` on a search run "
            "to the end shows which rung keeps its winner)"
        ]
    return []
