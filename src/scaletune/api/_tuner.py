"""Tuner: automatic model tuning of an Estimator's job, in Python."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from scaletune.analysis import TuningSummary, analytics_dataframe, summarize
from scaletune.api._estimator import ChannelInput, Estimator
from scaletune.api._notebook import in_notebook, show_records_as_html, tuning_html
from scaletune.api._session import Session
from scaletune.api._waiting import wait_showing
from scaletune.spec import tuning_spec_from_dict
from scaletune.store import JobStatus, Store, StoreLocation
from scaletune.training import request_tuning_stop
from scaletune.tuning import TuningController

if TYPE_CHECKING:
    import pandas as pd


class TuningJob:
    """A handle on one tuning job, running here or recorded in the store."""

    def __init__(
        self,
        tuning_id: str,
        store: Store,
        thread: threading.Thread | None = None,
        location: StoreLocation | None = None,
    ):
        """`location`: where the store lives (a console over it is linked from notebooks)."""
        self.id = tuning_id
        self._store = store
        self._thread = thread
        self._location = location
        show_records_as_html()

    def describe(self) -> dict[str, Any]:
        """Status, best job and objective, job counts, cost and time (as `tuning show --json`)."""
        return self.summary().to_json_dict()

    def summary(self) -> TuningSummary:
        return summarize(self._store, self.id)

    def best_training_job(self) -> str | None:
        return self._store.get_tuning_job(self.id).best_training_job

    def analytics(self) -> TuningJobAnalytics:
        return TuningJobAnalytics(self._store, self.id)

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        """Block until the tuning job ends; Ctrl-C while waiting stops it. In a notebook,
        one display shows it as it runs."""
        if self._thread is not None:
            wait_showing(
                self._thread, timeout, self.stop, f"tuning job {self.id!r}", self._repr_html_
            )
        return self.describe()

    def _repr_html_(self) -> str:
        """How a notebook shows the job: counts, best trial, cost, time, best so far."""
        ended = [
            (row.end_time, None if row.status is JobStatus.FAILED else row.objective)
            for row in self._store.trials.rows(self.id)
            if row.end_time is not None and row.status.is_terminal
        ]
        console = None if self._location is None else self._location.console_url()
        return tuning_html(self.summary(), ended, console, time.time())

    def stop(self) -> None:
        """Stop starting trials and stop the running ones; the job ends as Stopped (one that
        already ended is left as it is, as by `tuning stop`)."""
        request_tuning_stop(self._store, self.id)


class TuningJobAnalytics:
    def __init__(self, store: Store, tuning_id: str) -> None:
        self._store, self._id = store, tuning_id

    def dataframe(self) -> pd.DataFrame:
        """One row per training job: tuned hyperparameters, status, objective, times, cost."""
        return analytics_dataframe(self._store, self._id)


class Tuner:
    """Search hyperparameter ranges for an Estimator's job; every trial is a training job of
    `estimator.instance_count` workers."""

    def __init__(
        self,
        estimator: Estimator,
        objective_metric_name: str,
        hyperparameter_ranges: Mapping[str, Any],
        *,
        objective_type: str = "Maximize",
        strategy: str = "Bayesian",
        max_jobs: int = 10,
        max_parallel_jobs: int = 1,
        early_stopping_type: str = "Off",
        hyperband: Mapping[str, Any] | None = None,
        pbt: Mapping[str, Any] | None = None,
        seed: int = 0,
        target_objective: float | None = None,
        max_jobs_without_improvement: int | None = None,
        completion: Mapping[str, Any] | None = None,
        name: str | None = None,
        objectives: Sequence[Mapping[str, str]] | None = None,
        constraints: Sequence[str | Mapping[str, Any]] | None = None,
        first_configurations: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """`objectives`: several at once, the first being `objective_metric_name`'s, e.g.
        [{"metric": "validation:auc", "type": "Maximize"}, {"metric": "billable_seconds",
        "type": "Minimize"}]; `constraints`: e.g. ["validation:auc >= 0.78"]; `pbt`: with
        strategy "PBT", e.g. {"perturbation_interval": 3}; `first_configurations`: tried
        before any proposal, a range left out taking its middle, e.g. [{"eta": 0.1}];
        `completion`: rules that end the search sooner, e.g. {"convergence": True} or
        {"min_improvement_per_cost": 0.01} (objective per billable worker-hour)."""
        self.estimator = estimator
        self._fields: dict[str, Any] = {
            "objective_metric": objective_metric_name,
            "objective_type": objective_type,
            "strategy": strategy,
            "ranges": {key: _range_dict(value) for key, value in hyperparameter_ranges.items()},
            "max_jobs": max_jobs,
            "max_parallel_jobs": max_parallel_jobs,
            "early_stopping": early_stopping_type,
            "seed": seed,
        }
        optional = {
            "hyperband": dict(hyperband) if hyperband else None,
            "pbt": dict(pbt) if pbt else None,
            "name": name,
            "target_objective": target_objective,
            "max_jobs_without_improvement": max_jobs_without_improvement,
            "completion": dict(completion) if completion else None,
            "objectives": [dict(o) for o in objectives] if objectives else None,
            "constraints": list(constraints) if constraints else None,
            "first_configurations": [dict(c) for c in first_configurations]
            if first_configurations
            else None,
        }
        self._fields.update({key: value for key, value in optional.items() if value is not None})
        self.latest_tuning_job: TuningJob | None = None

    def fit(self, channels: Mapping[str, ChannelInput], *, wait: bool = True) -> TuningJob:
        training = self.estimator.spec(channels)
        spec = tuning_spec_from_dict({**self._fields, "training": training.model_dump()})
        session = self.estimator.session or Session()
        owns_session = self.estimator.session is None
        controller = TuningController(session.controller)
        tuning_id = controller.create(spec)

        def run() -> None:
            try:
                controller.run(tuning_id, spec)
            finally:
                if owns_session:
                    session.backend.close()

        thread = None
        if wait and not in_notebook():
            run()
        else:  # in a notebook, in a thread too: the wait shows it running
            thread = threading.Thread(target=run, name=f"scaletune-{tuning_id}", daemon=True)
            thread.start()
        self.latest_tuning_job = TuningJob(tuning_id, session.store, thread, session.location)
        if wait and thread is not None:
            self.latest_tuning_job.wait()
        return self.latest_tuning_job

    def describe(self) -> dict[str, Any]:
        """Best job and objective, job counts, cost, wall time; with several objectives the
        Pareto front (`pareto_front`), with a target the cheapest and fastest to reach it."""
        return self._latest().describe()

    def best_training_job(self) -> str | None:
        return self._latest().best_training_job()

    def analytics(self) -> TuningJobAnalytics:
        return self._latest().analytics()

    def wait(self, timeout: float | None = None) -> dict[str, Any]:
        return self._latest().wait(timeout)

    def stop(self) -> None:
        self._latest().stop()

    def _latest(self) -> TuningJob:
        if self.latest_tuning_job is None:
            raise RuntimeError("this Tuner has not been fitted: call fit() first")
        return self.latest_tuning_job


def _range_dict(value: Any) -> Any:
    dump = getattr(value, "model_dump", None)
    return dump() if callable(dump) else dict(value)
