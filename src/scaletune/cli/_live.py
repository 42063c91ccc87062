"""Live progress on a terminal while `train` and `tune` run: a training job's step of its
steps, the metrics it just reported and its time; a tuning job's trials done, running,
stopped and failed, its best and its time. One line that updates in place, on stderr, and
only where stderr is a terminal and the output is not JSON: a pipe, a log file or `--json`
gets nothing of it."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Self

if TYPE_CHECKING:
    from rich.console import Console

    from scaletune.tuning import TuningProgress
    from scaletune.worker import Report


class _Line:
    """A rich progress line, started and stopped with the run; it stays on the terminal
    once stopped, showing where the run ended and how long it took."""

    def __init__(self, console: Console, description: str, total: int | None) -> None:
        # Here, not at the top: `scaletune --help` and the read commands never draw one.
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        self._progress = Progress(
            TextColumn("{task.description}"),
            BarColumn(bar_width=24),
            TextColumn("{task.fields[where]}"),
            TimeElapsedColumn(),
            console=console,
            refresh_per_second=4,
        )
        self._total = total
        self._task = self._progress.add_task(description, total=total, where="starting")

    def __enter__(self) -> Self:
        self._progress.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._progress.stop()

    def _show(self, completed: int, where: str, total: int | None = None) -> None:
        self._progress.update(self._task, completed=completed, where=where, total=total)


class LiveJob(_Line):
    """A training job's line: its bar where its steps are known (an algorithm's rounds or
    epochs; a script's are not)."""

    def report(self, report: Report) -> None:
        """Called from the controller's thread at every report (rich's updates are locked)."""
        of = "" if self._total is None else f" of {self._total}"
        metrics = "  ".join(f"{name}={value:.4g}" for name, value in sorted(report.metrics.items()))
        self._show(report.step, f"step {report.step}{of}  {metrics}")


class LiveTuning(_Line):
    """A tuning job's line: its trials ended of max_jobs, the others as counts, its best."""

    def show(self, progress: TuningProgress) -> None:
        ended = progress.completed + progress.stopped + progress.failed
        best = "-" if progress.best is None else f"{progress.best:.6g}"
        paused = f", {progress.paused} paused" if progress.paused else ""
        self._show(
            ended,
            f"{ended} of {progress.max_jobs} trials ended ({progress.completed} completed, "
            f"{progress.stopped} stopped, {progress.failed} failed), "
            f"{progress.running} running{paused}; best {best}",
            total=progress.max_jobs,
        )


class Quiet:
    """No live line: stderr is not a terminal, or the output is JSON."""

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        return None

    def report(self, report: Report) -> None:
        return None

    def show(self, progress: TuningProgress) -> None:
        return None


def live_job(
    console: Console, description: str, total: int | None, json_output: bool
) -> LiveJob | Quiet:
    if json_output or not console.is_terminal:
        return Quiet()
    return LiveJob(console, description, total)


def live_tuning(console: Console, description: str, json_output: bool) -> LiveTuning | Quiet:
    if json_output or not console.is_terminal:
        return Quiet()
    return LiveTuning(console, description, total=None)  # max_jobs comes with the progress
