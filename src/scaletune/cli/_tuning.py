"""`scaletune tune` and `scaletune tuning ...`.

Past 400 lines: one function per command and the few renderers of a tuning job's summary,
front and target that only these commands print."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from scaletune.cli._live import live_tuning
from scaletune.cli._options import (
    BackendOption,
    JsonListOption,
    JsonOption,
    RayAddressOption,
    StoreOption,
    err,
    open_backend,
    open_store,
    out,
)
from scaletune.cli._render import print_table
from scaletune.cli._stdout import print_json
from scaletune.spec._names import CLUSTER_SIZE
from scaletune.store import JobStatus

if TYPE_CHECKING:  # the tuner and the training stack load only in the commands that run jobs
    from scaletune.analysis import TuningSummary
    from scaletune.api import Session
    from scaletune.cluster import Backend
    from scaletune.spec import TuningJobSpec
    from scaletune.store import Store
    from scaletune.tuning import TuningController


def _summarize(store: Store, tuning_id: str, *, trade_offs: bool = True) -> TuningSummary:
    from scaletune.analysis import summarize  # SQL aggregates: no tuner, no training stack

    return summarize(store, tuning_id, trade_offs=trade_offs)


tuning_app = typer.Typer(no_args_is_help=True, help="Look at and stop tuning jobs.")


def tune(
    file: Annotated[Path, typer.Argument(help="A TOML tuning file.")],
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="Override a key: --set max_jobs=6 --set training.instance_count=2"
        ),
    ] = None,
    json_output: JsonOption = False,
    no_wait: Annotated[
        bool,
        typer.Option(
            "--no-wait", help="Return at once; the tuning job runs on in a background process."
        ),
    ] = False,
    store: StoreOption = None,
    backend: BackendOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Run a tuning job: every trial is a distributed training job."""
    from scaletune.api import Session
    from scaletune.spec import load_tuning_spec
    from scaletune.tuning import TuningController, notices

    chosen = [f"training.cluster.backend={backend}"] if backend else []
    spec = load_tuning_spec(file, [*(overrides or ()), *chosen])
    for line in notices(spec):  # on stderr: --json's stdout stays one object
        err.print(line, highlight=False, soft_wrap=True)
    workers = _backend(spec, ray_address)
    with contextlib.closing(workers), Session(store, backend=workers) as session:
        tuner = TuningController(session.controller)
        tuning_id = tuner.create(spec)
        if no_wait:
            log = _run_in_background(session, tuning_id, ray_address)
            if json_output:
                print_json(_summarize(session.store, tuning_id).to_json_dict())
            else:
                out.print(
                    f"tuning job {tuning_id} started in the background (log: {log}); "
                    f"follow it with: scaletune tuning show {tuning_id}",
                    highlight=False,
                )
            return
        if not json_output:
            err.print(
                f"tuning job {tuning_id}: {spec.strategy.value}, {spec.max_jobs} jobs, "
                f"{spec.max_parallel_jobs} at a time",
                highlight=False,
            )
        summary = _with_progress(
            session, tuner, tuning_id, lambda: tuner.run(tuning_id, spec), json_output
        )
    _finish(summary, json_output)


@tuning_app.command("resume")
def tuning_resume(
    tuning_id: str,
    json_output: JsonOption = False,
    store: StoreOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Finish a tuning job whose controller died (even by kill -9): nothing runs twice."""
    from scaletune.api import Session
    from scaletune.spec import tuning_spec_from_dict
    from scaletune.tuning import TuningController

    with open_store(store) as records:  # which backend its trials ask for, how many at once
        spec = tuning_spec_from_dict(records.get_tuning_job(tuning_id).spec)
    workers = _backend(spec, ray_address)
    with contextlib.closing(workers), Session(store, backend=workers) as session:
        tuner = TuningController(session.controller)
        summary = _with_progress(
            session, tuner, tuning_id, lambda: tuner.resume(tuning_id), json_output
        )
    _finish(summary, json_output)


def _backend(spec: TuningJobSpec, ray_address: str | None) -> Backend:
    """The backend its trials ask for; a Ray instance started here fits all that run at once."""
    cluster = spec.training.cluster
    cpus = spec.max_parallel_jobs * spec.max_task_count * cluster.cpus_per_worker
    return open_backend(cluster.backend, ray_address, cpus)


def _run_in_background(session: Session, tuning_id: str, ray_address: str | None) -> Path:
    """`scaletune tuning resume ID` in a new session, so it outlives this command and its
    terminal; it runs the Pending job from the start."""
    log = session.location.home / "tuning" / f"{tuning_id}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    environment = {**os.environ, "SCALETUNE_STORE": session.location.url}
    if ray_address is not None:
        environment["RAY_ADDRESS"] = ray_address
    with log.open("ab") as output:
        subprocess.Popen(
            [sys.executable, "-m", "scaletune", "tuning", "resume", tuning_id],
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=output,
            env=environment,
            start_new_session=True,
        )
    return log


def _with_progress(
    session: Session,
    tuner: TuningController,
    tuning_id: str,
    action: Callable[[], object],
    json_output: bool,
) -> TuningSummary:
    """Run `action` with a live line on a terminal; the summary, whatever happened."""
    with live_tuning(err, "tuning", json_output) as live:
        tuner.on_progress = live.show
        try:
            action()
        finally:
            summary = _summarize(session.store, tuning_id)
    return summary


def _finish(summary: TuningSummary, json_output: bool) -> None:
    _show(summary, json_output)
    if summary.record.status is not JobStatus.COMPLETED:
        raise typer.Exit(1)


@tuning_app.command("replay")
def tuning_replay(
    tuning_id: str,
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--set",
            help="Change the replayed job: --set strategy=Random --set hyperband=... --set seed=3",
        ),
    ] = None,
    json_output: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """Run a finished tuning job again in simulated time, on the learning curves its trials
    recorded: what would this strategy, seed or budget have done? Takes seconds, trains nothing."""
    import time

    from scaletune.simulation import replay_tuning

    with open_store(store, controller=True) as records:
        record = replay_tuning(records, tuning_id, overrides or (), start_time=time.time())
        summary = _summarize(records, record.id)
    if not json_output:
        err.print(f"replay of {tuning_id} (simulated time):", highlight=False)
    _show(summary, json_output)


@tuning_app.command("list")
def tuning_list(
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 20,
    json_output: JsonListOption = False,
    store: StoreOption = None,
) -> None:
    """List tuning jobs, newest first."""
    with open_store(store) as records:
        summaries = [
            _summarize(records, record.id, trade_offs=False)
            for record in records.list_tuning_jobs(limit=limit)
        ]
    if json_output:
        print_json([summary.to_json_dict() for summary in summaries])
        return
    print_table(
        out,
        ("id", "status", "strategy", "jobs", "best", "worker-s"),
        (
            (
                summary.record.id,
                summary.record.status.value,
                summary.record.strategy,
                str(summary.trial_count),
                "-"
                if summary.record.best_objective is None
                else f"{summary.record.best_objective:.4f}",
                f"{summary.billable_seconds:.1f}",
            )
            for summary in summaries
        ),
        right=("jobs", "best", "worker-s"),
    )


@tuning_app.command("show")
def tuning_show(tuning_id: str, json_output: JsonOption = False, store: StoreOption = None) -> None:
    """Show a tuning job: best job, job counts, cost and time."""
    with open_store(store) as records:
        summary = _summarize(records, tuning_id)
    _show(summary, json_output)


@tuning_app.command("analytics")
def tuning_analytics(
    tuning_id: str,
    csv: Annotated[Path | None, typer.Option("--csv", help="Write the table to this file.")] = None,
    store: StoreOption = None,
) -> None:
    """One row per training job: hyperparameters, status, objective, times, cost."""
    from scaletune.analysis import analytics_dataframe

    with open_store(store) as records:
        frame = analytics_dataframe(records, tuning_id)
    if csv is not None:
        frame.to_csv(csv, index=False)
        out.print(f"wrote {len(frame)} rows to {csv}")
    else:
        out.print(frame.to_string(index=False))


@tuning_app.command("rungs")
def tuning_rungs(
    tuning_id: str,
    min_resource: Annotated[
        int | None,
        typer.Option(min=1, help="The first rung (default: the job's [hyperband], else 1)."),
    ] = None,
    eta: Annotated[
        int | None,
        typer.Option(min=2, help="Rungs eta times apart (default: the job's, else 3)."),
    ] = None,
    rank_by: Annotated[
        str | None,
        typer.Option(
            help="What a rung ranks: 'value' (each trial's value there) or 'forecast' (where "
            "its curve points at max_resource); default: the job's Hyperband's, else 'value'."
        ),
    ] = None,
    json_output: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """How well each rung's ranking foretells the final one: Kendall's tau and where the
    winner ranked there. Run it on a search without early stopping to pick min_resource."""
    from scaletune.analysis import rung_agreement

    with open_store(store) as records:
        report = rung_agreement(
            records, tuning_id, min_resource=min_resource, eta=eta, rank_by=rank_by
        )
    if json_output:
        print_json(report.to_json_dict())
        return
    keep = f"kept (top 1/{report.eta})"
    print_table(
        out,
        ["rung", "trials", "to the end", "Kendall tau", "winner's rank", keep],
        (
            [
                str(rung.resource),
                str(rung.trials),
                str(rung.pairs),
                "-" if rung.kendall_tau is None else f"{rung.kendall_tau:+.2f}",
                "-" if rung.winner_rank is None else str(rung.winner_rank),
                {True: "yes", False: "no", None: "-"}[rung.keeps_winner],
            ]
            for rung in report.rungs
        ),
        right={"rung", "trials", "to the end", "Kendall tau", "winner's rank"},
    )
    if report.rank_by == "forecast":
        out.print(
            f"Rungs ranked forecasts at step {report.max_resource} (none before a trial's 4th "
            "report)."
        )
    if report.winner is None:
        out.print(f"No trial that ran to its end reported {report.metric}.")
        return
    out.print(
        f"winner: {report.winner} ({report.metric} {report.winner_value:.6g} at step "
        f"{report.winner_step}, of {report.finished} trials that ran to their end)"
    )
    safe = report.safe_first_rung
    if not report.rungs:
        out.print(f"No rung from {report.min_resource} below step {report.max_resource}.")
    elif report.last_judging_rung is None:
        out.print("No rung judged the winner: it reported in none of their spans.")
    elif safe is None:
        out.print(
            f"In hindsight, even the last rung that judged the winner ({report.last_judging_rung})"
            " would have dropped it."
        )
    elif not (dropped := [str(r.resource) for r in report.rungs if r.keeps_winner is False]):
        out.print("In hindsight, every rung that judged the winner kept it.")
    else:
        out.print(
            f"In hindsight, the winner would have been dropped at rung{'s' * (len(dropped) > 1)} "
            f"{', '.join(dropped)}; min_resource = {safe} would have kept it at every rung."
        )


@tuning_app.command("stop")
def tuning_stop(tuning_id: str, store: StoreOption = None) -> None:
    """Stop a tuning job: its running training jobs are stopped, no new ones start."""
    from scaletune.training import request_tuning_stop

    with open_store(store) as records:
        outcome = request_tuning_stop(records, tuning_id)
    out.print(outcome.message)


def _show(summary: TuningSummary, json_output: bool) -> None:
    if json_output:
        print_json(summary.to_json_dict())
        return
    data = summary.to_json_dict()
    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row("tuning job", data["id"])
    table.add_row("status", data["status"])
    if data["failure_reason"]:
        table.add_row("reason", data["failure_reason"])
    if data["completion_reason"]:
        table.add_row("ended", data["completion_reason"])
    table.add_row("strategy", data["strategy"])
    if len(data["objectives"]) > 1:
        table.add_row(
            "objectives",
            ", ".join(f"{o['type'].lower()} {o['metric']}" for o in data["objectives"]),
        )
    if data["constraints"]:
        table.add_row("constraints", "; ".join(data["constraints"]))
    counts = ", ".join(f"{n} {status}" for status, n in data["job_counts"].items() if n)
    table.add_row("jobs", counts or "none")
    if data["waiting_for_room"]:
        table.add_row(
            "waiting for room",
            f"{len(data['waiting_for_room'])} job(s): {', '.join(data['waiting_for_room'])}",
        )
    if data["best_training_job"]:
        table.add_row("best job", data["best_training_job"])
        table.add_row(f"best {data['objective_metric']}", f"{data['best_objective']:.6g}")
        table.add_row(
            "best hyperparameters",
            ", ".join(f"{k}={v}" for k, v in sorted(data["best_hyperparameters"].items())),
        )
    table.add_row("billable", f"{data['billable_seconds']:.1f} worker-seconds")
    estimate = data["billable_seconds_without_early_stopping"]
    table.add_row("without early stopping", f"~{estimate:.1f} worker-seconds (estimated)")
    if data["wall_seconds"] is not None:
        table.add_row(
            "wall time",
            f"{data['wall_seconds']:.1f} s (one after another: "
            f"{data['sequential_wall_seconds']:.1f} s)",
        )
    target = summary.target
    if target is not None:
        table.add_row(
            f"target {target.metric} {target.target:g}",
            f"reached by {target.reached} trial(s)" if target.reached else "not reached",
        )
        for label, point in (("cheapest", target.cheapest), ("fastest", target.fastest)):
            if point is not None:
                settings = ", ".join(
                    f"{k}={v}"
                    for k, v in sorted(point.hyperparameters.items())
                    if k != CLUSTER_SIZE
                )
                table.add_row(
                    f"  {label}",
                    f"{point.job_id} on {point.instance_count} worker(s): "
                    f"{point.values.get('billable_seconds', 0):.1f} worker-seconds, "
                    f"{point.values.get('wall_seconds', 0):.1f} s"
                    + (f"; {settings}" if settings else ""),
                )
    out.print(table)
    if summary.pareto_front is not None:
        _show_front(summary)


def _show_front(summary: TuningSummary) -> None:
    front = summary.pareto_front or []
    names = [o.metric for o in summary.record.spec_view.objectives]
    tuned = summary.record.spec_view.tuned_hyperparameters
    print_table(
        out,
        ["trial", "workers", *names, *tuned],
        (
            [
                str(point.trial_number),
                str(point.instance_count),
                *(f"{point.values[n]:.6g}" if n in point.values else "-" for n in names),
                *(str(point.hyperparameters.get(n)) for n in tuned),
            ]
            for point in front
        ),
        title=f"Pareto front: {len(front)} completed trial(s) no other beats on every objective",
        right=["trial", "workers", *names],
    )
