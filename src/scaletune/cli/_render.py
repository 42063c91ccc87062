"""How records look on a terminal and as JSON."""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from datetime import datetime

from rich.console import Console
from rich.table import Table

from scaletune.spec._names import CapacityClass
from scaletune.store import (
    AttemptRecord,
    JobStatus,
    NoticeRecord,
    RejectedMetric,
    TrainingJobRecord,
    resizes,
)

_STATUS_STYLE = {
    JobStatus.COMPLETED: "green",
    JobStatus.FAILED: "red",
    JobStatus.STOPPED: "yellow",
    JobStatus.IN_PROGRESS: "cyan",
    JobStatus.PENDING: "white",
}


def print_table(
    console: Console,
    header: Sequence[str],
    rows: Iterable[Sequence[str]],
    *,
    title: str | None = None,
    right: Collection[str] = (),
) -> None:
    """A table when it fits the width (80 columns when piped); else one block of
    `name  value` lines per record, so that nothing is cut short or wrapped mid-word. A
    two-column table (a measure and its value) stays a table, its values wrapped."""
    rows = list(rows)
    table = Table(box=None, header_style="bold", title=title, title_justify="left")
    for index, name in enumerate(header):
        table.add_column(
            name,
            justify="right" if name in right else "left",
            no_wrap=len(header) != 2 or index == 1,  # a measure wraps at words; ids never
            overflow="fold",
        )
    if len(header) == 2:
        for row in rows:
            table.add_row(*row)
        console.print(table)
        return
    for row in rows:
        table.add_row(*row)
    unbounded = console.options.update_width(1_000_000)  # measuring clamps to the width given
    if console.measure(table, options=unbounded).maximum <= console.width:
        console.print(table)
        return
    if title:
        console.print(f"[italic]{title}[/italic]", highlight=False)
    for row in rows:
        block = Table(show_header=False, box=None, pad_edge=False)
        block.add_column(style="bold", no_wrap=True)
        block.add_column(overflow="fold")
        for name, value in zip(header, row, strict=True):
            block.add_row(name, value)
        console.print(block)
        console.print()


def job_summary(
    console: Console,
    record: TrainingJobRecord,
    rejected: list[RejectedMetric] | None = None,
    attempts: list[AttemptRecord] | None = None,
    notices: list[NoticeRecord] | None = None,
    costs: dict[str, float] | None = None,
) -> None:
    from scaletune.diagnostics import critical_batch_advice

    table = Table(show_header=False, box=None, pad_edge=False)
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")  # paths are never cut short
    style = _STATUS_STYLE[record.status]
    table.add_row("job", record.id)
    table.add_row("status", f"[{style}]{record.status.value}[/{style}]")
    if record.failure_reason:
        table.add_row("reason", record.failure_reason)
    table.add_row("algorithm", record.algorithm)
    table.add_row("workers", _workers(record, attempts or []))
    if attempts and attempts[-1].placement:
        table.add_row("placed", attempts[-1].placement)
    if record.wall_seconds is not None and record.billable_seconds is not None:
        table.add_row("wall time", f"{record.wall_seconds:.2f} s")
        table.add_row("billable", _billable(record.billable_seconds, record.billable_by_class))
        costs = costs if costs is not None else record.cost_by_class
        if costs is not None:
            apart = ", ".join(f"{name} {cost:.6g}" for name, cost in costs.items())
            table.add_row("cost", f"{sum(costs.values()):.6g} ({apart})")
    for name, value in sorted(record.final_metrics.items()):
        table.add_row(name, f"{value:.6g}")
    if rejected:
        shown = ", ".join(f"{r.name}={r.value} at step {r.step}" for r in rejected[:5])
        more = f" and {len(rejected) - 5} more" if len(rejected) > 5 else ""
        table.add_row("rejected", f"{shown}{more} (not finite: not recorded)")
    advice = critical_batch_advice(record.final_metrics, record.hyperparameters)
    if advice is not None:
        table.add_row("diagnosis", advice)
    if attempts and (len(attempts) > 1 or attempts[-1].checkpoint_step is not None):
        table.add_row("attempts", "\n".join(_attempt_line(attempt) for attempt in attempts))
    if notices:
        table.add_row("notices", "\n".join(_notice_line(notice) for notice in notices))
    if record.artifact:
        table.add_row("model", record.artifact)
    if record.log_dir:
        table.add_row("logs", record.log_dir)
    console.print(table)


def _billable(total: float, by_class: dict[str, float] | None) -> str:
    """Worker-seconds, and on which capacity where any was spot."""
    text = f"{total:.2f} worker-seconds"
    if by_class and set(by_class) != {CapacityClass.ON_DEMAND.value}:
        text += " (" + ", ".join(f"{s:.2f} {name}" for name, s in by_class.items()) + ")"
    return text


def _workers(record: TrainingJobRecord, attempts: list[AttemptRecord]) -> str:
    """A fixed job's size; an elastic one's range, its sizes over time, and why each change."""
    size_range = record.size_range
    if size_range is None:
        return str(record.instance_count)
    placed = [attempt.size for attempt in attempts if attempt.size]
    text = f"{size_range[0]} to {size_range[1]} (elastic)"
    if placed:
        text += f", {placed[0]} at first"
    for change in resizes(attempts):
        when = datetime.fromtimestamp(change.time).strftime("%H:%M:%S")
        text += f"\n{change.from_size} -> {change.to_size} at {when}: {change.reason}"
    if record.requested_size is not None:
        text += f"\nasked for {record.requested_size} (jobs resize)"
    return text


def _notice_line(notice: NoticeRecord) -> str:
    when = datetime.fromtimestamp(notice.given_at).strftime("%H:%M:%S")
    return (
        f"worker {notice.rank} (attempt {notice.attempt}): {notice.source} at {when}, its "
        f"machine going {notice.seconds:g} s later"
    )


def _attempt_line(attempt: AttemptRecord) -> str:
    start = (
        "from the start"
        if attempt.resumed_from_step is None
        else f"from step {attempt.resumed_from_step}"
    )
    redone = f", {attempt.steps_redone} step(s) redone" if attempt.steps_redone else ""
    saved = "" if attempt.checkpoint_step is None else f"; checkpoint at {attempt.checkpoint_step}"
    # A Stopped attempt that another followed was an elastic job's resize: say so.
    resized = attempt.status is JobStatus.STOPPED and attempt.retried
    shown = attempt.reason and (attempt.status is not JobStatus.STOPPED or resized)
    why = f": {attempt.reason}" if shown else ""
    then = " -> resized" if resized else " -> retried" if attempt.retried else ""
    size = f"{attempt.size} workers, " if attempt.size else ""
    return f"{attempt.number}. {attempt.status.value} ({size}{start}{redone}{saved}){why}{then}"


def jobs_table(console: Console, records: list[TrainingJobRecord]) -> None:
    print_table(
        console,
        ("id", "status", "workers", "wall s", "worker-s", "validation"),
        (
            (
                record.id,
                f"[{_STATUS_STYLE[record.status]}]{record.status.value}[/]",
                str(record.instance_count),
                _seconds(record.wall_seconds),
                _seconds(record.billable_seconds),
                _headline(record.final_metrics),
            )
            for record in records
        ),
        right=("workers", "wall s", "worker-s"),
    )


def _headline(metrics: dict[str, float]) -> str:
    """Validation metrics if any (what people compare jobs by), else all of them."""
    shown = {k: v for k, v in metrics.items() if k.startswith("validation:")} or metrics
    return "\n".join(f"{k.removeprefix('validation:')}={v:.4f}" for k, v in sorted(shown.items()))


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"
