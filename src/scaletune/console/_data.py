"""The data behind the console's charts, as JSON, and the trials as CSV.

A tuning job's charts are built once per change of the store (and once for good when the
job has ended): a page of 10,000 trials, refreshed live, does not rebuild them each time."""

from __future__ import annotations

import csv
import io
import threading
from collections.abc import Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scaletune.console import _charts
from scaletune.console._importance import importance
from scaletune.store import Store, TuningJobRecord


def routes() -> list[Route]:
    return [
        Route("/api/jobs/{job_id}/metrics", job_metrics),
        Route("/api/tuning/{tuning_id}/charts", tuning_charts),
        Route("/api/tuning/{tuning_id}/importance", tuning_importance),
        Route("/api/compare", compare_metrics),
        Route("/tuning/{tuning_id}/trials.csv", trials_csv),
    ]


class ChartCache:
    """Values computed from a tuning job's trials, kept until the store changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str], tuple[str, Any]] = {}

    def get(self, kind: str, store: Store, record: TuningJobRecord, make: Callable[[], Any]) -> Any:
        # An ended job's trials no longer change; a running one's change with the store.
        mark = (
            f"ended@{record.end_time}"
            if record.status.is_terminal
            else store.browse.change_mark().token()
        )
        with self._lock:
            cached = self._values.get((kind, record.id))
        if cached is not None and cached[0] == mark:
            return cached[1]
        value = make()
        with self._lock:
            self._values[(kind, record.id)] = (mark, value)
        return value


def _state(request: Request) -> Any:
    from scaletune.console._app import console_state

    return console_state(request)


def job_metrics(request: Request) -> Response:
    store: Store = _state(request).store
    job_id = request.path_params["job_id"]
    store.get_training_job(job_id)  # an unknown id is a 404
    return JSONResponse({"metrics": _series(store, job_id)})


def _series(store: Store, job_id: str) -> dict[str, dict[str, list[Any]]]:
    series: dict[str, dict[str, list[Any]]] = {}
    for point in store.metrics(job_id):
        entry = series.setdefault(point.name, {"steps": [], "values": []})
        if entry["steps"] and entry["steps"][-1] == point.step:  # a step reported again
            entry["values"][-1] = point.value
            continue
        entry["steps"].append(point.step)
        entry["values"].append(point.value)
    return series


def tuning_charts(request: Request) -> Response:
    state = _state(request)
    store: Store = state.store
    record = store.get_tuning_job(request.path_params["tuning_id"])

    def make() -> dict[str, Any]:
        objective = _charts.Objective.of(record)
        rows = store.trials.rows(record.id)
        shown = objective.ranked(rows)[: _charts.CURVES_SHOWN]
        curves = store.trials.curves(record.id, objective.metric, job_ids=[r.id for r in shown])
        return {
            "trials": len(rows),
            "curves": _charts.curves_chart(objective, _charts.rungs_of(record), shown, curves),
            "stops": _charts.stops_chart(objective, rows),
            "best": _charts.best_so_far_chart(objective, rows),
            "parallel": _charts.parallel_chart(record, objective, rows),
            "cluster": _charts.cluster_chart(objective, rows),
        }

    return JSONResponse(state.cache.get("charts", store, record, make))


def tuning_importance(request: Request) -> Response:
    state = _state(request)
    store: Store = state.store
    record = store.get_tuning_job(request.path_params["tuning_id"])

    def make() -> dict[str, Any]:
        from scaletune.console._importance import comparison_resource

        rows = store.trials.rows(record.id)
        resource = comparison_resource(rows)
        metric = _charts.Objective.of(record).metric
        curves = (
            {}
            if resource is None
            else store.trials.curves(record.id, metric, min_resource=resource, max_step=resource)
        )
        found = importance(record, rows, curves)
        return {
            "resource": found.resource,
            "trials": found.trials,
            "importances": found.importances,
            "note": found.note,
        }

    return JSONResponse(state.cache.get("importance", store, record, make))


def compare_metrics(request: Request) -> Response:
    from scaletune.console._pages import compared_ids

    store: Store = _state(request).store
    ids = compared_ids(request)
    for job_id in ids:
        store.get_training_job(job_id)
    per_job = {job_id: _series(store, job_id) for job_id in ids}
    names = sorted({name for series in per_job.values() for name in series})
    metrics = {}
    for name in names:
        steps = sorted(
            {s for series in per_job.values() for s in series.get(name, {}).get("steps", [])}
        )
        at = {step: i for i, step in enumerate(steps)}
        lines = []
        for job_id, series in per_job.items():
            values: list[float | None] = [None] * len(steps)
            entry = series.get(name, {"steps": [], "values": []})
            for step, value in zip(entry["steps"], entry["values"], strict=True):
                values[at[step]] = value
            lines.append({"label": job_id, "values": values})
        metrics[name] = {"steps": steps, "series": lines}
    return JSONResponse({"jobs": ids, "metrics": metrics})


def trials_csv(request: Request) -> Response:
    """The analytics table (`tuning analytics --csv`'s columns), times as POSIX seconds."""
    from scaletune.tuning._summary import ANALYTICS_COLUMNS, analytics_rows

    store: Store = _state(request).store
    record = store.get_tuning_job(request.path_params["tuning_id"])
    columns = [*record.spec.get("ranges", {}), *ANALYTICS_COLUMNS]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(analytics_rows(record, store.trials.rows(record.id)))
    return Response(
        buffer.getvalue(),
        media_type="text/csv",
        headers={"content-disposition": f'attachment; filename="{record.id}-trials.csv"'},
    )
