"""What a tuning job's settings will do that its user may not expect: one line each, printed
before it runs, never a refusal (the settings are legal, and may be meant)."""

from __future__ import annotations

from scaletune.spec import AlgorithmName, Strategy, TuningJobSpec

# Metrics that depend only on the order of the scores. XGBoost's first tree does not depend
# on its learning rate, which only scales that tree's scores: at round 1 these metrics are
# the same for every eta (tests/tuning/test_notices.py checks it on XGBoost itself).
_ORDER_METRICS = ("auc", "aucpr")


def notices(spec: TuningJobSpec) -> list[str]:
    """Lines worth reading before the job runs."""
    hyperband = spec.hyperband
    metric = spec.objective_metric.rsplit(":", 1)[-1]
    if (
        spec.strategy is Strategy.HYPERBAND
        and hyperband is not None
        and hyperband.min_resource == 1
        and spec.hyperband_rank_by == "value"  # a forecast needs 4 reports: round 1 judges nothing
        and spec.training.algorithm is AlgorithmName.XGBOOST
        and metric in _ORDER_METRICS
        and "eta" in spec.ranges
    ):
        return [
            f"note: Hyperband's first rung is round 1, where {spec.objective_metric} is the "
            "same for every eta (the first tree does not depend on it): the rung ranks trials "
            "by their other settings alone; hyperband.min_resource = 2 or more lets eta count, "
            'hyperband.rank_by = "forecast" ranks where curves point, from 4 reports on '
            "(`scaletune tuning rungs` on a search run to the end shows which rung keeps its "
            "winner)"
        ]
    return []
