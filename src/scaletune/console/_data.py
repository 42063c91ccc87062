"""The data behind the console's charts, as JSON, and the trials as CSV.

A tuning job's charts are built once per change of the store (and once for good when the
job has ended): a page of 10,000 trials, refreshed live, does not rebuild them each time."""

from __future__ import annotations

import csv
import io
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from scaletune.analysis import ANALYTICS_COLUMNS, analytics_rows, trial_marks
from scaletune.console import _charts
from scaletune.console._importance import comparison_resource, importance
from scaletune.console._pages import compared_ids
from scaletune.console._state import console_state
from scaletune.store import Store, TrainingJobRecord


def routes() -> list[Route]:
    return [
        Route("/api/jobs/{job_id}/metrics", job_metrics),
        Route("/api/tuning/{tuning_id}/charts", tuning_charts),
        Route("/api/tuning/{tuning_id}/importance", tuning_importance),
        Route("/api/compare", compare_metrics),
        Route("/tuning/{tuning_id}/trials.csv", trials_csv),
    ]


def job_metrics(request: Request) -> Response:
    store: Store = console_state(request).store
    job_id = request.path_params["job_id"]
    record = store.get_training_job(job_id)  # an unknown id is a 404
    return JSONResponse({"metrics": _series(store, job_id), "sizes": _sizes(store, record)})


def _sizes(store: Store, record: TrainingJobRecord) -> dict[str, list[float]] | None:
    """An elastic job's workers over time: each placed attempt's size from its start (seconds
    since the job started), held to the end of the last; None for a job of a fixed size."""
    if record.size_range is None:
        return None
    placed = [attempt for attempt in store.attempts.of(record.id) if attempt.workers]
    if not placed:
        return None
    began = record.start_time if record.start_time is not None else placed[0].start_time
    seconds = [attempt.start_time - began for attempt in placed]
    workers = [float(attempt.size) for attempt in placed]
    if placed[-1].end_time is not None:
        seconds.append(placed[-1].end_time - began)
        workers.append(workers[-1])
    return {"seconds": seconds, "workers": workers}


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
    state = console_state(request)
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
    state = console_state(request)
    store: Store = state.store
    record = store.get_tuning_job(request.path_params["tuning_id"])

    def make() -> dict[str, Any]:
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
    store: Store = console_state(request).store
    ids = compared_ids(request)
    for job_id in ids:
        store.get_training_job(job_id)
    per_job = {job_id: _series(store, job_id) for job_id in ids}
    names = sorted({name for series in per_job.values() for name in series})
    metrics = {}
    for name in names:
        steps, columns = _charts.aligned(
            {
                job_id: list(zip(entry["steps"], entry["values"], strict=True))
                for job_id, series in per_job.items()
                for entry in [series.get(name, {"steps": [], "values": []})]
            }
        )
        lines = [{"label": job_id, "values": columns[job_id]} for job_id in per_job]
        metrics[name] = {"steps": steps, "series": lines}
    return JSONResponse({"jobs": ids, "metrics": metrics})


def trials_csv(request: Request) -> Response:
    """The analytics table (`tuning analytics --csv`'s columns), times as POSIX seconds."""
    store: Store = console_state(request).store
    record = store.get_tuning_job(request.path_params["tuning_id"])
    columns = [*record.spec_view.tuned, *ANALYTICS_COLUMNS]
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(
        analytics_rows(record, store.trials.rows(record.id), trial_marks(store, record))
    )
    return Response(
        buffer.getvalue(),
        media_type="text/csv",
        headers={"content-disposition": f'attachment; filename="{record.id}-trials.csv"'},
    )
