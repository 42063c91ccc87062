"""`scaletune experiment convergence` and `scaletune report`: the story as tables and pictures."""

from __future__ import annotations

import shlex
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from scaletune.cli._options import JsonOption, StoreOption, err, open_store, out
from scaletune.cli._render import print_table
from scaletune.cli._stdout import print_json
from scaletune.errors import InvalidInputError

if TYPE_CHECKING:  # the experiment (matplotlib, the training stack) loads when a command runs
    from scaletune.experiment import ExperimentProgress, Report

experiment_app = typer.Typer(no_args_is_help=True, help="Reproduce the reference's experiments.")


def _command_line() -> str:
    return shlex.join(["scaletune", *sys.argv[1:]])


def parse_workers(text: str) -> list[int]:
    """'3' or '1,2,3,4': each a cluster size of at least 1."""
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        sizes = []
    if not sizes or any(size < 1 or size > 256 for size in sizes):
        raise InvalidInputError(
            f"--workers {text!r}: give a number of workers from 1 to 256, or a list like 1,2,3,4"
        )
    return sizes


def _algorithm(text: str) -> str:
    from scaletune.experiment._plans import EXPERIMENT_ALGORITHMS

    if text not in EXPERIMENT_ALGORITHMS:
        choices = ", ".join(repr(name) for name in EXPERIMENT_ALGORITHMS)
        raise InvalidInputError(f"--algorithm {text!r}: choose one of {choices}")
    return text


def _data(path: Path | None) -> Path | None:
    if path is None:
        return None
    if not path.exists():
        raise InvalidInputError(f"--data {str(path)!r} does not exist")
    try:
        if path.is_dir():
            next(path.iterdir(), None)
        else:
            with path.open("rb"):
                pass
    except OSError as exc:
        raise InvalidInputError(f"--data {str(path)!r} cannot be read: {exc}") from None
    # As given: reports record it so (no machine's absolute path); jobs resolve it themselves.
    return path


class _Display:
    """A live line on a terminal; plain lines (one per change of phase or count) elsewhere."""

    def __init__(self) -> None:
        self._started = time.monotonic()
        self._last: tuple[object, ...] | None = None
        self._status = err.status("starting") if err.is_terminal else None

    def __enter__(self) -> _Display:
        if self._status is not None:
            self._status.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._status is not None:
            self._status.__exit__(None, None, None)

    def __call__(self, progress: ExperimentProgress) -> None:
        best = "-" if progress.best is None else f"{progress.best:.4f}"
        elapsed = time.monotonic() - self._started
        line = (
            f"[{progress.phase_number}/{progress.phases}] {progress.phase}: "
            f"{progress.jobs_done}/{progress.jobs_total} jobs done, {progress.jobs_running} "
            f"running, best {best}, {elapsed:.0f} s"
        )
        if self._status is not None:
            self._status.update(line)
            return
        key = (progress.phase_number, progress.jobs_done)
        if key != self._last:
            self._last = key
            err.print(line, highlight=False, soft_wrap=True)


@experiment_app.command("convergence")
def convergence(
    algorithm: Annotated[str, typer.Option(help="xgboost or dnn.")] = "xgboost",
    workers: Annotated[
        str, typer.Option(help="Cluster size to tune, or a sweep like 1,2,3,4 (largest tuned).")
    ] = "3",
    data: Annotated[
        Path | None,
        typer.Option(
            help="Bank marketing CSV (xgboost) or MNIST folder (dnn); default: a "
            "small set scikit-learn ships."
        ),
    ] = None,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder for the report.")] = None,
    max_jobs: Annotated[int | None, typer.Option(min=1, help="Trials per tuning job.")] = None,
    max_parallel_jobs: Annotated[
        int | None, typer.Option(min=1, help="Trials at once per tuning job.")
    ] = None,
    seed: Annotated[int, typer.Option(min=0)] = 0,
    json_output: JsonOption = False,
    store: StoreOption = None,
) -> None:
    """1 worker vs N, Hyperband tuning of the N-worker job, the tuned job retrained: the
    reference's tables side by side with scaletune's, pictures, and an HTML report."""
    from scaletune.api import Session
    from scaletune.experiment import convergence_report, plan_for, run_convergence

    plan = plan_for(
        _algorithm(algorithm),
        _data(data),
        max_jobs=max_jobs,
        max_parallel_jobs=max_parallel_jobs,
    )
    sizes = parse_workers(workers)
    if max_jobs is not None and max_parallel_jobs is not None and max_parallel_jobs > max_jobs:
        raise InvalidInputError(
            f"--max-parallel-jobs {max_parallel_jobs} is more than --max-jobs {max_jobs}"
        )
    target = out_dir or Path("scaletune-results") / f"convergence-{plan.algorithm}"
    with Session(store) as session, _Display() as display:
        result = run_convergence(session, plan, sizes, seed=seed, on_progress=display)
    report = convergence_report(result)
    report.command = _command_line()
    page = report.write(target)
    if json_output:
        print_json({"report": str(page), **report.data})
        return
    show_report(report)
    out.print(f"report: {page}", highlight=False, soft_wrap=True)  # whole, to copy


def show_report(report: Report) -> None:
    """The report's tables on the terminal (the pictures are in the HTML and PNG files)."""
    out.print(f"[bold]{report.title}[/bold]", highlight=False)
    out.print(report.intro, highlight=False, markup=False)
    for title, rows, note in report.tables:
        header, *body = rows
        print_table(out, header, body, title=title)
        if note:
            out.print(note, highlight=False, markup=False)


def report(
    tuning_job_id: str,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Folder for the report.")] = None,
    store: StoreOption = None,
) -> None:
    """Write the HTML report (tables, pictures, configuration) of a stored tuning job."""
    from scaletune.experiment import stored_tuning_report

    with open_store(store) as records:
        document = stored_tuning_report(records, tuning_job_id)
    document.command = _command_line()
    page = document.write(out_dir or Path("scaletune-results") / f"tuning-{tuning_job_id}")
    show_report(document)
    out.print(f"report: {page}", highlight=False, soft_wrap=True)  # whole, to copy
