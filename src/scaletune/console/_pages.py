"""The console's HTML pages, and the fragments of them that refresh live (the same URL with
htmx's `HX-Request` header returns only the part that changes)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

from scaletune.analysis import summarize
from scaletune.console._charts import CURVES_SHOWN, Objective, rungs_of
from scaletune.console._logs import tail
from scaletune.console._security import CSRF_FIELD
from scaletune.console._state import console_state
from scaletune.errors import InvalidInputError
from scaletune.store import JobStatus, TrainingJobRecord, TrialOrder, TrialSortKey

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def routes() -> list[Route]:
    return [
        Route("/", jobs_page),
        Route("/jobs", jobs_page),
        Route("/jobs/{job_id}/logs/{worker:int}", job_log),
        Route("/jobs/{job_id}/stop", stop_job, methods=["POST"]),
        Route("/jobs/{job_id}", job_page),
        Route("/tuning", tuning_list_page),
        Route("/tuning/{tuning_id}/trials", trials_table),
        Route("/tuning/{tuning_id}/stop", stop_tuning, methods=["POST"]),
        Route("/tuning/{tuning_id}", tuning_page),
        Route("/compare", compare_page),
    ]


def _render(request: Request, name: str, context: dict[str, Any]) -> Response:
    return console_state(request).templates.TemplateResponse(request, name, context)


def _fragment(request: Request) -> bool:
    return request.headers.get("hx-request") == "true"


# -- training jobs -------------------------------------------------------------------------


def jobs_page(request: Request) -> Response:
    state = console_state(request)
    query = request.query_params
    status = _status(query.get("status"))
    algorithm = query.get("algorithm") or None
    tuning_job = query.get("tuning_job") or None
    page = _page_number(query.get("page"))
    counts = state.store.browse.counts(tuning_job_id=tuning_job, algorithm=algorithm)
    total = counts[status] if status is not None else sum(counts.values())
    records = state.store.list_training_jobs(
        status=status,
        tuning_job_id=tuning_job,
        algorithm=algorithm,
        limit=PAGE_SIZE,
        offset=(page - 1) * PAGE_SIZE,
    )
    records = [_reconciled(state, record) for record in records]
    context = {
        "jobs": records,
        "counts": counts,
        "total": total,
        "status": status,
        "algorithm": algorithm,
        "tuning_job": tuning_job,
        "algorithms": state.store.browse.algorithms(),
        "page": page,
        "pages": max(1, -(-total // PAGE_SIZE)),
        "statuses": list(JobStatus),
    }
    return _render(request, "_jobs_table.html" if _fragment(request) else "jobs.html", context)


def job_page(request: Request) -> Response:
    from scaletune.diagnostics import critical_batch_advice

    state = console_state(request)
    record = _reconciled(state, state.store.get_training_job(request.path_params["job_id"]))
    attempts = state.store.attempts.of(record.id)
    context = {
        "job": record,
        "attempts": attempts,
        "placed": attempts[-1] if attempts and attempts[-1].workers else None,  # the latest
        "rejected": state.store.rejected(record.id)[:20],
        "costs": record.costs(state.store.prices()),  # at its file's prices, else the store's
        "notices": state.store.notices.of(record.id),
        "advice": critical_batch_advice(record.final_metrics, record.hyperparameters),
        "backend": record.spec_view.backend,
        "workers": list(range(record.instance_count)),
        "stopped": request.query_params.get("stopped"),
    }
    return _render(request, "_job_summary.html" if _fragment(request) else "job.html", context)


def job_log(request: Request) -> Response:
    state = console_state(request)
    record = state.store.get_training_job(request.path_params["job_id"])
    worker = int(request.path_params["worker"])
    if not 0 <= worker < record.instance_count:
        raise InvalidInputError(
            f"worker {worker}: job {record.id!r} has workers 0 to {record.instance_count - 1}"
        )
    path = Path(record.log_dir or "") / f"worker-{worker}.log"
    text, cut = tail(path) if record.log_dir else (None, False)
    return _render(
        request, "_log.html", {"job": record, "worker": worker, "text": text, "cut": cut}
    )


async def stop_job(request: Request) -> Response:
    from scaletune.training import request_job_stop

    state = console_state(request)
    job_id = request.path_params["job_id"]
    await _check_csrf(request, state)
    outcome = await run_in_threadpool(
        request_job_stop, state.store, job_id, time.time(), via="console"
    )
    return RedirectResponse(f"/jobs/{job_id}?stopped={outcome.status.value}", status_code=303)


def _reconciled(state: Any, record: TrainingJobRecord) -> TrainingJobRecord:
    """A job whose controller died shows as ended, as `jobs list` does (not when read-only:
    that console writes nothing)."""
    if state.access.read_only or record.status is not JobStatus.IN_PROGRESS:
        return record
    from scaletune.training import reconcile_orphan

    reconciled: TrainingJobRecord = reconcile_orphan(state.store, record, time.time())
    return reconciled


# -- tuning jobs -----------------------------------------------------------------------------


def tuning_list_page(request: Request) -> Response:
    state = console_state(request)
    page = _page_number(request.query_params.get("page"))
    counts = state.store.browse.tuning_counts()
    total = sum(counts.values())
    jobs = state.store.list_tuning_jobs(limit=PAGE_SIZE, offset=(page - 1) * PAGE_SIZE)
    context = {
        "tuning_jobs": jobs,
        "counts": counts,
        "total": total,
        "page": page,
        "pages": max(1, -(-total // PAGE_SIZE)),
    }
    return _render(request, "_tuning_table.html" if _fragment(request) else "tunings.html", context)


def tuning_page(request: Request) -> Response:
    state = console_state(request)
    summary = summarize(state.store, request.path_params["tuning_id"])
    record = summary.record
    context = {
        "summary": summary,
        "tuning": record,
        "objective": Objective.of(record),
        "rungs": rungs_of(record),
        "cluster_tuned": record.spec_view.tunes_cluster_size,
        "curves_shown": CURVES_SHOWN,
        "stopped": request.query_params.get("stopped"),
        **_trials_context(state, request),
    }
    if _fragment(request):
        return _render(request, "_tuning_summary.html", context)
    return _render(request, "tuning.html", context)


def trials_table(request: Request) -> Response:
    state = console_state(request)
    record = state.store.get_tuning_job(request.path_params["tuning_id"])
    return _render(
        request, "_trials_table.html", {"tuning": record, **_trials_context(state, request)}
    )


_STATUS_GROUPS = {
    "all": None,
    "ended": [JobStatus.COMPLETED, JobStatus.STOPPED],
    "running": [JobStatus.IN_PROGRESS, JobStatus.PENDING, JobStatus.PAUSED],
    "failed": [JobStatus.FAILED],
}


def _trials_context(state: Any, request: Request) -> dict[str, Any]:
    """A page of trials sorted in SQL. By default the best objective first: failed trials,
    which have none, come last instead of filling the first pages."""
    tuning_id = request.path_params["tuning_id"]
    record = state.store.get_tuning_job(tuning_id)
    query = request.query_params
    sort = _choice(query.get("sort", "objective"), TrialSortKey, "sort")
    maximize = Objective.of(record).maximize
    default_descending = sort is TrialSortKey.OBJECTIVE and maximize
    descending = query.get("desc", "1" if default_descending else "0") == "1"
    group = query.get("show", "all")
    if group not in _STATUS_GROUPS:
        raise InvalidInputError(f"show={group!r}: one of {', '.join(_STATUS_GROUPS)}")
    statuses = _STATUS_GROUPS[group]
    counts = state.store.browse.counts(tuning_job_id=tuning_id)
    total = sum(counts[s] for s in statuses) if statuses else sum(counts.values())
    page = _page_number(query.get("page"))
    per_page = _page_number(query.get("per_page") or str(PAGE_SIZE), "per_page")
    if per_page > MAX_PAGE_SIZE:
        raise InvalidInputError(f"per_page={per_page}: at most {MAX_PAGE_SIZE}")
    rows = state.store.trials.rows(
        tuning_id,
        order=TrialOrder(sort, descending),
        statuses=statuses,
        limit=per_page,
        offset=(page - 1) * per_page,
    )
    return {
        "trials": rows,
        "tuned": record.spec_view.tuned,
        "sort": sort.value,
        "descending": descending,
        "show": group,
        "groups": list(_STATUS_GROUPS),
        "trial_page": page,
        "trial_pages": max(1, -(-total // per_page)),
        "per_page": per_page,
        "trial_total": total,
        "sort_keys": [key.value for key in TrialSortKey],
    }


async def stop_tuning(request: Request) -> Response:
    from scaletune.training import request_tuning_stop

    state = console_state(request)
    tuning_id = request.path_params["tuning_id"]
    await _check_csrf(request, state)
    outcome = await run_in_threadpool(request_tuning_stop, state.store, tuning_id)
    return RedirectResponse(f"/tuning/{tuning_id}?stopped={outcome.status.value}", status_code=303)


# -- comparing jobs ------------------------------------------------------------------------------


def compare_page(request: Request) -> Response:
    state = console_state(request)
    ids = compared_ids(request)
    jobs = [state.store.get_training_job(job_id) for job_id in ids]
    names = sorted({name for job in jobs for name in job.hyperparameters})
    metrics = sorted({name for job in jobs for name in job.final_metrics})
    context = {"jobs": jobs, "hyperparameters": names, "metrics": metrics, "ids": ",".join(ids)}
    return _render(request, "compare.html", context)


def compared_ids(request: Request) -> list[str]:
    given = request.query_params.getlist("jobs")
    ids = [part.strip() for value in given for part in value.split(",") if part.strip()]
    if not ids:
        raise InvalidInputError("compare needs jobs: /compare?jobs=ID,ID")
    return list(dict.fromkeys(ids))


# -- request values ----------------------------------------------------------------------------


async def _check_csrf(request: Request, state: Any) -> None:
    """The token is a form field or the X-CSRF-Token header."""
    form = await request.form()
    given = request.headers.get("x-csrf-token") or form.get(CSRF_FIELD)
    if not state.access.csrf_matches(given if isinstance(given, str) else None):
        raise HTTPException(403, "missing or wrong CSRF token: use the page's Stop button")


def _status(value: str | None) -> JobStatus | None:
    if not value:
        return None
    status: JobStatus = _choice(value, JobStatus, "status")
    return status


def _choice(value: str, kind: Any, what: str) -> Any:
    try:
        return kind(value)
    except ValueError:
        known = ", ".join(member.value for member in kind)
        raise InvalidInputError(f"{what}={value!r}: one of {known}") from None


def _page_number(value: str | None, name: str = "page") -> int:
    if value is None or value == "":
        return 1
    if not value.isdigit() or int(value) < 1:
        raise InvalidInputError(f"{name}={value!r}: a whole number from 1")
    return int(value)
