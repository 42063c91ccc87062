"""What every report shares: the `Report` (tables, pictures, files; written as Markdown,
JSON and one self-contained HTML page rendered from `views`' report.html) and the helpers
that format its figures. The convergence experiment's report is `_convergence_report`, a
stored tuning job's `_tuning_report`."""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import platform
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from scaletune.analysis import TuningSummary
from scaletune.store import TrainingJobRecord, TrialRow

Table = list[list[str]]  # first row: the header
MISSING = "–"  # noqa: RUF001  # an en dash marks a figure that does not exist


@dataclass
class Report:
    """What a report holds; written as report.html, results.md, results.json and PNGs."""

    title: str
    intro: str
    command: str | None = None  # the command line that made it, shown at the top
    tables: list[tuple[str, Table, str]] = field(default_factory=list)  # title, rows, note
    pictures: list[tuple[str, str, bytes]] = field(default_factory=list)  # file, caption, png
    configuration: dict[str, Any] = field(default_factory=dict)
    data: dict[str, Any] = field(default_factory=dict)  # the figures, as JSON
    files: dict[str, str] = field(default_factory=dict)  # more files by name (a CSV)

    def write(self, folder: Path) -> Path:
        """Write every file; the HTML last (and atomically), so its presence means done."""
        folder.mkdir(parents=True, exist_ok=True)
        for name, _, png in self.pictures:
            (folder / name).write_bytes(png)
        for name, text in self.files.items():
            (folder / name).write_text(text)
        payload = {
            "title": self.title,
            "command": self.command,
            "configuration": self.configuration,
            **self.data,
        }
        (folder / "results.json").write_text(json.dumps(payload, indent=2, default=str) + "\n")
        (folder / "results.md").write_text(self.markdown())
        partial = folder / ".report.html.partial"
        partial.write_text(self.html())
        partial.replace(folder / "report.html")
        return folder / "report.html"

    def markdown(self) -> str:
        lines = [f"# {self.title}", "", self.intro, ""]
        if self.command:
            lines += [f"Command: `{self.command}`", "", _machine_line(), ""]
        for title, rows, note in self.tables:
            lines += [f"## {title}", "", *_markdown_table(rows), ""]
            if note:
                lines += [note, ""]
        for name, caption, _ in self.pictures:
            lines += [f"![{caption}]({name})", "", f"*{caption}*", ""]
        lines += [
            "## Configuration",
            "",
            "```json",
            json.dumps(self.configuration, indent=2, default=str),
            "```",
            "",
        ]
        return "\n".join(lines)

    def html(self) -> str:
        """One self-contained page from the console's templates (report.html)."""
        from scaletune.views import render, stylesheet  # Jinja2: only when a page is written

        pictures = [
            {"file": name, "caption": caption, "encoded": base64.b64encode(png).decode()}
            for name, caption, png in self.pictures
        ]
        return render(
            "report.html",
            report=self,
            pictures=pictures,
            machine=_machine_line() if self.command else None,
            configuration=json.dumps(self.configuration, indent=2, default=str),
            stylesheet=stylesheet(),
        )


def _cell(value: object) -> str:
    if value is None or value != value:  # None or NaN
        return MISSING
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def _csv(rows: Sequence[Mapping[str, object]], columns: Sequence[str]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(
        buffer, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n"
    )
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()


def _markdown_table(rows: Table) -> list[str]:
    header, *body = rows
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *["| " + " | ".join(row) + " |" for row in body],
    ]


def environment() -> dict[str, Any]:
    packages: dict[str, str | None] = {}
    for name in ("scaletune", "torch", "xgboost-cpu", "optuna", "numpy", "matplotlib"):
        try:
            packages[name] = version(name)
        except PackageNotFoundError:
            packages[name] = None
    return {
        "date": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "packages": packages,
    }


def _machine_line() -> str:
    machine = environment()
    return (
        f"Machine: {machine['cpus']} CPUs, {machine['platform']}, Python {machine['python']}, "
        f"{machine['date']}."
    )


def _number(value: float | None, digits: int = 4) -> str:
    return MISSING if value is None else f"{value:.{digits}f}"


def _change(before: float | None, after: float | None, *, less_is_better: bool) -> str:
    if before is None or after is None or before == 0:
        return MISSING
    change = (after - before) / before * 100
    if less_is_better:
        return f"{-change:.0f} % less" if change <= 0 else f"{change:.0f} % more"
    return f"{change:+.0f} %"


def _record(record: TrainingJobRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "status": record.status.value,
        "instance_count": record.instance_count,
        "hyperparameters": record.hyperparameters,
        "final_metrics": record.final_metrics,
        "wall_seconds": record.wall_seconds,
        "billable_seconds": record.billable_seconds,
    }


def _tuning(summary: TuningSummary, trials: Sequence[TrialRow]) -> dict[str, Any]:
    return {
        **summary.to_json_dict(),
        "trials": [
            {
                "id": trial.id,
                "status": trial.status.value,
                "instance_count": trial.instance_count,
                "hyperparameters": trial.hyperparameters,
                "wall_seconds": trial.wall_seconds,
                "billable_seconds": trial.billable_seconds,
                "objective": trial.objective,
                "resource": trial.resource,
            }
            for trial in trials
        ],
    }
