"""Jobs in a Jupyter notebook: a training or tuning job renders as HTML (status, figures, a
small chart, a link to the console when one runs over the store), and waiting on one keeps a
single display up to date instead of printing lines. HTML comes from the views' templates;
IPython is imported only inside a kernel that already loaded it."""

from __future__ import annotations

import math
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from scaletune.analysis import TuningSummary, best_so_far
from scaletune.store import TrainingJobRecord

CHART_WIDTH, CHART_HEIGHT = 320, 64
MOST_POINTS = 320  # a point a pixel across
# Optuna imports tqdm.auto, which warns in a kernel without ipywidgets that its bars cannot
# be widgets: scaletune draws no tqdm bar, so a tuning job's cell need not show that.
warnings.filterwarnings("ignore", message="IProgress not found", module="tqdm.auto")
REFRESH_SECONDS = 0.5  # a display update at most this often while waiting


@dataclass(frozen=True)
class Polyline:
    """A series as an SVG polyline's points in a box, with the ends it spans."""

    points: str
    first: float
    last: float
    first_x: int
    last_x: int
    x_label: str
    width: int = CHART_WIDTH
    height: int = CHART_HEIGHT

    @classmethod
    def of(cls, xs: Sequence[int], ys: Sequence[float], x_label: str) -> Polyline | None:
        pairs = [(x, y) for x, y in zip(xs, ys, strict=True) if math.isfinite(y)]
        if len(pairs) < 2:
            return None
        if len(pairs) > MOST_POINTS:  # evenly thinned, both ends kept: a small picture
            last = len(pairs) - 1
            pairs = [pairs[round(i * last / (MOST_POINTS - 1))] for i in range(MOST_POINTS)]
        low_x, high_x = pairs[0][0], pairs[-1][0]
        low_y = min(y for _, y in pairs)
        high_y = max(y for _, y in pairs)
        span_x, span_y = max(high_x - low_x, 1), (high_y - low_y) or 1.0
        pad = 3
        points = " ".join(
            f"{pad + (x - low_x) / span_x * (CHART_WIDTH - 2 * pad):.1f},"
            f"{CHART_HEIGHT - pad - (y - low_y) / span_y * (CHART_HEIGHT - 2 * pad):.1f}"
            for x, y in pairs
        )
        return cls(points, pairs[0][1], pairs[-1][1], low_x, high_x, x_label)


def job_html(
    record: TrainingJobRecord,
    series: dict[str, list[tuple[int, float]]],
    steps: int | None,
    console: str | None,
    now: float,
) -> str:
    """A training job: its status, where it is, its metrics and the curve of one of them
    (a validation metric where there is one)."""
    from scaletune.views import render

    names = sorted(series)
    metric = next((n for n in names if n.startswith("validation")), names[0] if names else "")
    points = series.get(metric, [])
    line = Polyline.of([s for s, _ in points], [v for _, v in points], "step")
    reached = max((step for values in series.values() for step, _ in values), default=None)
    return render(
        "notebook_job.html",
        job=record,
        metric=metric,
        line=line,
        reached=reached,
        steps=steps,
        elapsed=_elapsed(record.start_time, record.end_time, record.wall_seconds, now),
        console=None if console is None else _link(console, f"jobs/{record.id}"),
    )


def tuning_html(
    summary: TuningSummary,
    ended: Sequence[tuple[float, float | None]],
    console: str | None,
    now: float,
) -> str:
    """A tuning job: its counts, its best trial and settings, cost and time, and the best
    objective so far against the trials ended (`ended`: each ended trial's end time and
    objective, None for a failed one)."""
    from scaletune.views import render

    record = summary.record
    objective = record.spec_view.objective
    metric = objective.metric
    in_order = [value for _, value in sorted(ended, key=lambda trial: trial[0])]
    bests = best_so_far(in_order, objective.maximize)
    known = [(count, best) for count, best in enumerate(bests, start=1) if best is not None]
    xs, ys = [count for count, _ in known], [best for _, best in known]
    return render(
        "notebook_tuning.html",
        summary=summary,
        metric=metric,
        line=Polyline.of(xs, ys, "trial"),
        elapsed=_elapsed(record.start_time, record.end_time, record.wall_seconds, now),
        console=None if console is None else _link(console, f"tuning/{record.id}"),
    )


def _link(console: str, path: str) -> str:
    """The console's page for `path`, its token kept (a console reachable from elsewhere)."""
    base, _, query = console.partition("?")
    return f"{base.rstrip('/')}/{path}" + (f"?{query}" if query else "")


def _elapsed(start: float | None, end: float | None, wall: float | None, now: float) -> float:
    if wall is not None and end is not None:
        return wall
    return 0.0 if start is None else max(now - start, 0.0)


def in_notebook() -> bool:
    """True inside a Jupyter kernel (not a terminal IPython, not plain Python)."""
    if "IPython" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and hasattr(shell, "kernel")


def show_records_as_html() -> None:
    """In a kernel, what the handles return renders as HTML too: a training job's record
    (`describe()`) and a tuning job's summary (`summary()`), without their curves (the
    handles draw those: a record holds no series)."""
    if not in_notebook():
        return
    from IPython import get_ipython

    html = get_ipython().display_formatter.formatters["text/html"]
    html.for_type(TrainingJobRecord, lambda record: job_html(record, {}, None, None, time.time()))
    html.for_type(TuningSummary, lambda summary: tuning_html(summary, (), None, time.time()))


class LiveDisplay:
    """One notebook output that `refresh` redraws: progress, not a flood of lines."""

    def __init__(self, html: Callable[[], str], clock: Callable[[], float] = time.monotonic):
        from IPython.display import HTML, display

        self._html, self._clock, self._make = html, clock, HTML
        self._handle: Any = display(HTML(html()), display_id=True)
        self._shown = clock()

    def refresh(self, *, force: bool = False) -> None:
        if force or self._clock() - self._shown >= REFRESH_SECONDS:
            self._handle.update(self._make(self._html()))
            self._shown = self._clock()
