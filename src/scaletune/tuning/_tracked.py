"""A tuning job as its trackers see it: an MLflow parent run over its trials' runs, and a
TensorBoard HParams experiment over its trials' event files."""

from __future__ import annotations

import logging

from scaletune.spec import TuningJobSpec
from scaletune.store import Store
from scaletune.tracking import TrackedTuning, Tracking, TuningEnd, TuningTracker

log = logging.getLogger("scaletune.tracking")


def start_tracking(
    tracking: Tracking, spec: TuningJobSpec, tuning_id: str, start_time: float
) -> TuningTracker:
    return tracking.tuning(
        spec.tracking,
        TrackedTuning(
            tuning_id,
            spec.name,
            spec.strategy.value,
            spec.objective_metric,
            spec.objective_type.value,
            ranges={name: r.model_dump(mode="json") for name, r in spec.ranges.items()},
            settings={
                "strategy": spec.strategy.value,
                "objective_metric": spec.objective_metric,
                "objective_type": spec.objective_type.value,
                "max_jobs": spec.max_jobs,
                "max_parallel_jobs": spec.max_parallel_jobs,
                "seed": spec.seed,
            },
            start_time=start_time,
        ),
    )


def end_tracking(tracker: TuningTracker, store: Store, tuning_id: str) -> None:
    """Tell the trackers how the tuning job ended, as the store has it now; tracking never
    fails the tuning job, so a store that cannot be read here costs a warning."""
    try:
        record = store.get_tuning_job(tuning_id)
        assert record.end_time is not None  # recorded as ended just before
        end = TuningEnd(
            record.status,
            record.end_time,
            record.best_training_job,
            record.best_objective,
            trials=store.trials.totals(tuning_id, None).trials,
        )
    except Exception as exc:
        log.warning("scaletune: the tuning job's trackers were not told how it ended: %s", exc)
        return
    tracker.finish(end)
