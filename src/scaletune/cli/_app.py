"""The `scaletune` command: its training-job commands (train, demo, jobs ...), console, and the
app that the other modules' command groups join.

Past 400 lines: one short function per command, each importing what it uses when it runs (so
`--help` stays light); the tuning, experiment and advice commands live apart."""

from __future__ import annotations

import contextlib
import dataclasses
import signal
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from scaletune.cli._advise import advise
from scaletune.cli._experiment import convergence, experiment_app, report
from scaletune.cli._help import summarise_commands
from scaletune.cli._live import live_job
from scaletune.cli._notice import jobs_notice
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
from scaletune.cli._predict import predict
from scaletune.cli._prices import prices
from scaletune.cli._render import job_summary, jobs_table, print_table
from scaletune.cli._stdout import print_json
from scaletune.cli._tuning import tune, tuning_app
from scaletune.errors import (
    InvalidInputError,
    ScaletuneError,
    StoreError,
    StoreUnavailableError,
)
from scaletune.store import JobStatus, resizes, resolve_store

# Each command imports what it uses when it runs: `scaletune --help` and the commands that
# read records load no training stack, scikit-learn, torch, xgboost, matplotlib or Ray.
if TYPE_CHECKING:
    from scaletune.spec import BackendName
    from scaletune.store import Store, TrainingJobRecord
    from scaletune.training import PreparedJob, Stopper, TrainingController

PREEMPTION_GRACE_SECONDS = 30.0  # after SIGTERM, for the workers to checkpoint and end

app = typer.Typer(
    name="scaletune",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    help="Distributed training jobs and automatic model tuning, on your own machines.\n\n"
    "Exit codes: 0 done; 1 an error (a job that did not complete); 2 bad input, named on one "
    "line; 3 the store did not answer (nothing was changed: run it again once it is back); "
    "130 interrupted.",
)
jobs_app = typer.Typer(no_args_is_help=True, help="Look at and stop training jobs.")
app.add_typer(jobs_app, name="jobs")
app.command("tune")(tune)
app.add_typer(tuning_app, name="tuning")
app.add_typer(experiment_app, name="experiment")
app.command("report")(report)
app.command("advise")(advise)
app.command("predict")(predict)
app.command("prices")(prices)


@app.command()
def train(
    file: Annotated[Path, typer.Argument(help="A TOML job file.")],
    overrides: Annotated[
        list[str] | None,
        typer.Option(
            "--set", help="Override a key: --set instance_count=1 --set hyperparameters.eta=0.1"
        ),
    ] = None,
    best_of: Annotated[
        str | None,
        typer.Option(
            "--best-of",
            help="Take the tuned settings of this tuning job's best trial (before --set): "
            "tuned on 1 worker, run on 8 with --set instance_count=8 "
            "--set hyperparameters.lr_scaling=adascale",
        ),
    ] = None,
    json_output: JsonOption = False,
    store: StoreOption = None,
    backend: BackendOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Run a training job and print its summary."""
    from scaletune.spec import load_training_spec

    chosen = [f"cluster.backend={backend}"] if backend else []
    best = [] if best_of is None else _best_settings(store, best_of)
    spec = load_training_spec(file, [*best, *(overrides or ()), *chosen])
    _run_prepared(
        spec.cluster.backend,
        lambda controller: controller.prepare(spec),
        store,
        json_output,
        ray_address,
        spec.task_count * spec.cluster.cpus_per_worker,
    )


def _best_settings(store: str | None, tuning_id: str) -> list[str]:
    """The best trial's values of the tuned ranges, as --set overrides (a tuned cluster size
    is left out: the job says where it runs)."""
    import json

    from scaletune.analysis import summarize  # SQL aggregates: no tuner, no training stack

    with open_store(store) as records:
        summary = summarize(records, tuning_id, trade_offs=False)
    if summary.best is None:
        raise InvalidInputError(f"--best-of {tuning_id!r}: the tuning job has no best trial yet")
    tuned = summary.record.spec_view.tuned_hyperparameters
    values = summary.best.hyperparameters
    return [f"hyperparameters.{name}={json.dumps(values[name])}" for name in tuned]


@app.command()
def demo(
    workers: Annotated[int, typer.Option(min=1, help="Workers per training job.")] = 3,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder for the report.")] = None,
    store: StoreOption = None,
) -> None:
    """The convergence experiment, small and offline: XGBoost on scikit-learn's bundled breast
    cancer data, 1 vs 3 workers, Hyperband tuning of the 3-worker job, and its report."""
    convergence(
        algorithm="xgboost",
        workers=str(workers),
        data=None,
        out_dir=out_dir or Path("scaletune-results") / "demo",
        max_jobs=None,
        max_parallel_jobs=None,
        seed=0,
        json_output=False,
        store=store,
    )


@jobs_app.command("list")
def jobs_list(
    status: Annotated[JobStatus | None, typer.Option(help="Only jobs with this status.")] = None,
    tuning_job: Annotated[
        str | None, typer.Option("--tuning-job", help="Only the trials of this tuning job.")
    ] = None,
    limit: Annotated[int, typer.Option(min=1, help="At most this many, newest first.")] = 20,
    offset: Annotated[
        int, typer.Option(min=0, help="Skip this many first: the next page is --offset LIMIT.")
    ] = 0,
    json_output: JsonListOption = False,
    store: StoreOption = None,
) -> None:
    """List training jobs, newest first."""
    from scaletune.training import reconcile_orphan

    with open_store(store) as records:
        now = time.time()
        jobs = [
            reconcile_orphan(records, record, now)
            for record in records.list_training_jobs(
                status=status, tuning_job_id=tuning_job, limit=limit, offset=offset
            )
        ]
    if json_output:
        print_json([record.to_json_dict() for record in jobs])
    else:
        jobs_table(out, jobs)


@jobs_app.command("show")
def jobs_show(job_id: str, json_output: JsonOption = False, store: StoreOption = None) -> None:
    """Show one training job."""
    from scaletune.training import reconcile_orphan

    with open_store(store) as records:
        record = reconcile_orphan(records, records.get_training_job(job_id), time.time())
        _show(records, record, json_output)


@jobs_app.command("metrics")
def jobs_metrics(
    job_id: str,
    name: Annotated[
        str | None, typer.Option("--name", help="One metric (default: every one).")
    ] = None,
    json_output: JsonListOption = False,
    store: StoreOption = None,
) -> None:
    """A job's reported metrics, step by step (one indexed read)."""
    with open_store(store) as records:
        records.get_training_job(job_id)  # an unknown id is an error, not an empty list
        points = records.metrics(job_id, name)
    if json_output:
        print_json([dataclasses.asdict(point) for point in points])
        return
    print_table(
        out,
        ("name", "step", "value", "time (UTC)"),
        (
            (
                p.name,
                str(p.step),
                f"{p.value:.6g}",
                datetime.fromtimestamp(p.time, UTC).isoformat(timespec="milliseconds"),
            )
            for p in points
        ),
        right=("step", "value"),
    )


@jobs_app.command("resume")
def jobs_resume(
    job_id: str,
    json_output: JsonOption = False,
    store: StoreOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Continue a Stopped or Failed job from its latest checkpoint (same id, a new attempt)."""
    from scaletune.spec import BackendName, training_spec_from_dict
    from scaletune.training import reconcile_orphan

    with open_store(store) as records:  # a job whose controller died is Failed from now on
        record = reconcile_orphan(records, records.get_training_job(job_id), time.time())
    stored = record.spec_view
    _run_prepared(
        BackendName(stored.backend),
        lambda controller: controller.prepare_resume(job_id),
        store,
        json_output,
        ray_address,
        # the workers, and a parameter-server job's chief and servers
        training_spec_from_dict(record.spec).task_count * stored.cpus_per_worker,
    )


@jobs_app.command("logs")
def jobs_logs(
    job_id: str,
    worker: Annotated[int, typer.Option(min=0, help="Which worker's log (rank).")] = 0,
    store: StoreOption = None,
) -> None:
    """Print a worker's log."""
    from scaletune.training import JobPaths

    with open_store(store) as records:
        record = records.get_training_job(job_id)
    if worker >= record.instance_count:
        raise InvalidInputError(
            f"--worker {worker}: job {job_id!r} has workers 0 to {record.instance_count - 1}"
        )
    log = JobPaths(logs=Path(record.log_dir or ""), artifact=Path()).log_path(worker)
    if not log.exists():
        raise InvalidInputError(f"job {job_id!r} has no log for worker {worker} at {str(log)!r}")
    sys.stdout.write(log.read_text(encoding="utf-8", errors="replace"))


@app.command("console")
def console_command(
    store: StoreOption = None,
    host: Annotated[
        str,
        typer.Option(help="Address to listen on; any but loopback needs the printed token."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port (0: any free one).")] = 8470,
    read_only: Annotated[
        bool, typer.Option("--read-only", help="Hide the Stop buttons and refuse every change.")
    ] = False,
    token: Annotated[
        str | None,
        typer.Option(
            envvar="SCALETUNE_CONSOLE_TOKEN",
            help="The token to ask for (default: a random one when --host is not loopback).",
        ),
    ] = None,
    allow_host: Annotated[
        list[str] | None,
        typer.Option("--allow-host", help="Another Host name to answer to (a proxy's)."),
    ] = None,
    max_live_pages: Annotated[
        int,
        typer.Option(
            min=1, help="Live pages (event streams) served at once; more are told to wait."
        ),
    ] = 64,
) -> None:
    """A live web console: jobs, tuning jobs, their charts and logs, Stop buttons."""
    from scaletune.console import open_console

    console = open_console(
        open_store(store),
        host,
        port,
        token=token,
        read_only=read_only,
        allow_hosts=allow_host,
        max_live_pages=max_live_pages,
    )
    out.print(f"scaletune console: {console.url}", highlight=False, soft_wrap=True)
    out.file.flush()
    with resolve_store(store).announce_console(console.url):  # for notebooks' links
        console.serve()


@jobs_app.command("stop")
def jobs_stop(job_id: str, store: StoreOption = None) -> None:
    """Stop a running training job (its controller ends the workers)."""
    from scaletune.training import request_job_stop

    with open_store(store) as records:
        outcome = request_job_stop(records, job_id, time.time(), via="jobs stop")
    out.print(outcome.message)


jobs_app.command("notice")(jobs_notice)


@jobs_app.command("resize")
def jobs_resize(
    job_id: str,
    workers: Annotated[int, typer.Argument(help="the size to go on at, within its min..max")],
    store: StoreOption = None,
) -> None:
    """Ask an elastic job for another size: it goes on at it from its next checkpoint, and
    keeps to it while the capacity allows."""
    with open_store(store) as records:
        record = records.get_training_job(job_id)
        size_range = record.size_range
        if size_range is None:
            raise InvalidInputError(
                f"job {job_id!r} is not elastic: its instance_count is {record.instance_count}, "
                "not a { min, max } range"
            )
        fewest, most = size_range
        if not fewest <= workers <= most:
            raise InvalidInputError(
                f"workers={workers}: job {job_id!r} trains on {fewest} to {most} workers"
            )
        if record.status is JobStatus.COMPLETED:
            raise InvalidInputError(f"job {job_id!r} is Completed: there is nothing to resize")
        records.request_size(job_id, workers)
    when = (
        "from its next checkpoint"
        if record.status is JobStatus.IN_PROGRESS
        else "when it runs again (jobs resume)"
    )
    out.print(f"job {job_id}: asked for {workers} workers; it goes on at that size {when}")


def _run_prepared(
    backend_name: BackendName,
    prepare: Callable[[TrainingController], PreparedJob],
    store: str | None,
    json_output: bool,
    ray_address: str | None,
    cpus_needed: float,
) -> None:
    from scaletune.api import Session
    from scaletune.training import Stopper

    backend = open_backend(backend_name, ray_address, cpus_needed, warm_pool=False)
    with contextlib.closing(backend), Session(store, backend=backend) as session:
        job = prepare(session.controller)
        spec = job.spec
        workers = (
            f"{spec.min_workers} to {spec.instance_count} workers (elastic)"
            if spec.elastic
            else f"{spec.instance_count} worker(s)"
        )
        title = f"job {job.id}: {workers}, {spec.algorithm}"
        if not json_output:
            err.print(title, highlight=False)
        stop = Stopper()
        steps = job.algorithm.full_resource(job.hyperparameters)
        try:
            with (
                live_job(err, "training", steps, json_output) as live,
                _preemptible(job.id, stop),
            ):
                record = session.controller.run(job, stop, on_report=live.report)
        except KeyboardInterrupt:
            record = session.store.get_training_job(job.id)
            _show(session.store, record, json_output)
            raise typer.Exit(130) from None
        _show(session.store, record, json_output)
    if record.status is not JobStatus.COMPLETED:
        if record.status is JobStatus.FAILED:  # why, on stderr too: the table is on stdout
            reason = (record.failure_reason or "no reason recorded").splitlines()[0]
            err.print(
                f"[red]error:[/red] job {record.id} failed: {reason}",
                highlight=False,
                soft_wrap=True,
            )
        raise typer.Exit(1)


@contextlib.contextmanager
def _preemptible(job_id: str, stop: Stopper) -> Iterator[None]:
    """SIGTERM (what a preempted machine or a scheduler sends) asks the workers to save a
    checkpoint at their next step and end: the job ends Stopped, and `jobs resume` goes on."""

    def preempted(signum: int, frame: FrameType | None) -> None:
        stop.request(
            JobStatus.STOPPED,
            f"SIGTERM: stopped at a checkpoint; continue with `scaletune jobs resume {job_id}`",
            grace_seconds=PREEMPTION_GRACE_SECONDS,
        )

    previous = signal.signal(signal.SIGTERM, preempted)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _show(store: Store, record: TrainingJobRecord, json_output: bool) -> None:
    rejected = store.rejected(record.id)
    attempts = store.attempts.of(record.id)
    notices = store.notices.of(record.id)
    costs = record.costs(store.prices())
    if json_output:
        print_json(
            record.to_json_dict()
            | {
                "cost_by_class": costs,
                "attempts": [attempt.to_json_dict() for attempt in attempts],
                "sizes": [change.to_json_dict() for change in resizes(attempts)],
                "notices": [notice.to_json_dict() for notice in notices],
                "rejected_metrics": [dataclasses.asdict(item) for item in rejected],
            }
        )
    else:
        job_summary(out, record, rejected, attempts, notices, costs)


def _terminate_as_interrupt(signum: int, frame: FrameType | None) -> NoReturn:
    raise KeyboardInterrupt


def main() -> None:
    """Entry point: project errors become one line on stderr (exit 2 for bad input, 3 for a
    store that does not answer)."""
    signal.signal(signal.SIGTERM, _terminate_as_interrupt)  # `timeout`, `kill`: clean up too
    try:
        code = app(standalone_mode=False)  # returns typer.Exit's code rather than raising it
        if isinstance(code, int) and code:
            sys.exit(code)
    except StoreUnavailableError as exc:  # nothing was changed: run it again once it is back
        err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(3)
    except (InvalidInputError, StoreError) as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except ScaletuneError as exc:
        err.print(f"[red]error:[/red] {exc}", highlight=False, soft_wrap=True)
        sys.exit(1)
    except typer.TyperException as exc:  # usage errors: missing argument, bad option value
        show = getattr(exc, "show", None)
        if callable(show):
            show()
        else:
            err.print(f"error: {exc.format_message()}", highlight=False)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (KeyboardInterrupt, typer.Abort):
        sys.exit(130)


summarise_commands(app)  # last: every command and group is registered by now
