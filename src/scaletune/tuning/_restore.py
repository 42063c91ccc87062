"""What a tuning job's searcher and scheduler learn again from the store: its parents'
trials (warm start) before it begins, and its own trials' reports when it is resumed."""

from __future__ import annotations

from dataclasses import dataclass

from scaletune.analysis._objectives import Goals
from scaletune.analysis._values import tuned_value
from scaletune.spec import TuningJobSpec
from scaletune.store import JobStatus, Store, TrainingJobRecord
from scaletune.tuning._running_cost import billed_until
from scaletune.tuning._searchers import Searcher


def warm_start(store: Store, spec: TuningJobSpec, searcher: Searcher) -> int:
    """The parents' finished trials, as the searcher's first observations; how many it used."""
    used = 0
    for parent_id in spec.warm_start.parents if spec.warm_start else []:
        for trial in store.training_jobs_of(parent_id):
            if trial.status is JobStatus.FAILED or trial.objective is None:
                continue
            config = {name: tuned_value(trial, name) for name in spec.ranges}
            if None not in config.values() and searcher.add_prior(config, trial.objective):
                used += 1
    return used


@dataclass(frozen=True)
class PastReport:
    number: int  # the trial's
    step: int
    value: float  # of the objective
    others: tuple[float, ...]  # the other objectives as they stood (several objectives)


def past_reports(
    store: Store,
    spec: TuningJobSpec,
    goals: Goals,
    extra_tasks: int,
    trials: list[TrainingJobRecord],
) -> list[PastReport]:
    """Every report of the objective, in the order the scheduler first saw them, with the
    other objectives as they stood: a reported metric's value at or before that step; a cost
    from the time since the trial started, which counts a promoted trial's pause as well
    (close enough to bring a ranking back). `extra_tasks`: a parameter-server job's chief
    and servers, billed beside its workers."""
    reports: list[tuple[float, PastReport]] = []
    for trial in trials:
        attempts = store.attempts.of(trial.id) if trial.size_range else None
        series = {
            name: {p.step: p.value for p in store.metrics(trial.id, name)}
            for name in goals.reported_others
        }
        latest: dict[str, float] = {}
        for point in store.metrics(trial.id, spec.objective_metric):
            for name, values in series.items():
                if point.step in values:
                    latest[name] = values[point.step]
            elapsed = point.time - (trial.start_time or point.time)
            billable = (
                elapsed * (trial.instance_count + extra_tasks)
                if attempts is None
                else billed_until(attempts, point.time)
            )
            others = goals.standing(latest, elapsed, billable)
            report = PastReport(trial.trial_number or 0, point.step, point.value, others)
            reports.append((point.time, report))
    reports.sort(key=lambda r: (r[0], r[1].number, r[1].step))
    return [report for _, report in reports]
