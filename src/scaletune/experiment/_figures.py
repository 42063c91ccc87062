"""The experiment's pictures, drawn with matplotlib (no display needed) as PNG bytes."""

from __future__ import annotations

import io
import itertools
from collections.abc import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")  # files only: never look for a display

import matplotlib.pyplot as plt  # after the backend is chosen
from matplotlib.collections import LineCollection
from matplotlib.figure import Figure

from scaletune.analysis import hyperband_brackets
from scaletune.analysis._values import best_so_far as tuning_best_so_far
from scaletune.store import JobStatus, MetricPoint, TrainingJobRecord, TrialRow

Trial = TrainingJobRecord | TrialRow
MANY_TRIALS = 200  # past this, lines thin out and markers go, so that 10,000 stay legible

SIZE = (7.5, 4.2)


def _png(figure: Figure) -> bytes:
    buffer = io.BytesIO()
    figure.tight_layout()
    figure.savefig(buffer, format="png", dpi=110)
    plt.close(figure)
    return buffer.getvalue()


def learning_curves(
    curves: Mapping[str, Sequence[MetricPoint]], metric: str, step_name: str
) -> bytes:
    """The objective per step of each named run."""
    figure, axes = plt.subplots(figsize=SIZE)
    for label, points in curves.items():
        axes.plot([p.step for p in points], [p.value for p in points], marker=".", label=label)
    axes.set_xlabel(step_name)
    axes.set_ylabel(metric)
    axes.set_title(f"Learning curves: {metric}")
    axes.grid(alpha=0.3)
    axes.legend()
    return _png(figure)


def hyperband_rungs(
    min_resource: int, max_resource: int, eta: int, brackets: int | None = None
) -> list[int]:
    rungs, _ = hyperband_brackets(min_resource, max_resource, eta, brackets)
    return sorted({rung for bracket in rungs for rung in bracket})


def tuning_trials(
    trials: Sequence[Trial],
    curves: Mapping[str, Sequence[MetricPoint]],
    metric: str,
    step_name: str,
    rungs: Sequence[int],
    title: str,
    maximize: bool = True,
) -> bytes:
    """Every trial's curve; where Hyperband stopped one, an x; its rungs as dashed lines.
    The curves are drawn as two line collections (one draw call each, at any count)."""
    figure, axes = plt.subplots(figsize=SIZE)
    for rung in rungs:
        axes.axvline(rung, color="grey", linestyle="--", linewidth=0.8)
    scored = [t for t in trials if t.objective is not None]
    sign = 1.0 if maximize else -1.0
    best = max(scored, key=lambda t: sign * (t.objective or 0.0), default=None)
    many = len(trials) > MANY_TRIALS
    lines: dict[bool, list[list[tuple[int, float]]]] = {True: [], False: []}  # stopped?
    ends: list[tuple[int, float]] = []
    for trial in trials:
        points = curves.get(trial.id, [])
        if not points or (best is not None and trial.id == best.id):
            continue
        stopped = trial.status in (JobStatus.STOPPED, JobStatus.PAUSED)  # for now, or good
        lines[stopped].append([(p.step, p.value) for p in points])
        if stopped:
            ends.append((points[-1].step, points[-1].value))
    for stopped, color in ((True, "tab:gray"), (False, "tab:blue")):
        axes.add_collection(
            LineCollection(
                lines[stopped],
                colors=color,
                alpha=0.15 if many else 0.55,
                linewidths=0.5 if many else 1.0,
                zorder=2,
            )
        )
    if ends:
        axes.scatter(
            [step for step, _ in ends],
            [value for _, value in ends],
            marker="x",
            color="black",
            s=8 if many else 36,
            linewidths=0.6 if many else 1.2,
            zorder=4,
        )
    best_points = curves.get(best.id, []) if best is not None else []
    if best_points:
        axes.plot(
            [p.step for p in best_points],
            [p.value for p in best_points],
            color="tab:red",
            linewidth=2.0,
            zorder=3,
        )
    axes.autoscale_view()
    axes.plot([], [], color="tab:blue", label="ran to the end")
    axes.plot([], [], color="tab:gray", label="stopped early")
    axes.plot([], [], marker="x", color="black", linestyle="", label="where it was stopped")
    axes.plot([], [], color="tab:red", linewidth=2.0, label="best trial")
    if rungs:
        axes.plot([], [], color="grey", linestyle="--", label="Hyperband rungs")
    if len(rungs) and max(rungs) * 20 < max(
        (p.step for points in curves.values() for p in points), default=1
    ):
        axes.set_xscale("symlog", linthresh=1)
    axes.set_xlabel(step_name)
    axes.set_ylabel(metric)
    axes.set_title(title)
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    return _png(figure)


def best_so_far(
    trials: Sequence[Trial], maximize: bool = True
) -> tuple[list[float], list[float | None]]:
    """Cumulative billable worker-seconds and the best objective reached, trial by trial in
    the order they ended (None until a trial has an objective)."""
    ended = sorted((t for t in trials if t.end_time is not None), key=lambda t: t.end_time or 0)
    costs = list(itertools.accumulate(t.billable_seconds or 0.0 for t in ended))
    return costs, tuning_best_so_far((t.objective for t in ended), maximize)


def step_corners(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points a step line (drawn "post") needs: the first, each where the value
    changes, and the last."""
    return [
        point
        for index, point in enumerate(points)
        if index in (0, len(points) - 1) or point[1] != points[index - 1][1]
    ]


def cost_against_quality(
    runs: Mapping[str, Sequence[Trial]],
    metric: str,
    baseline: float | None,
    maximize: bool = True,
) -> bytes:
    """Best objective so far against billable worker-seconds spent, one line per tuning job."""
    figure, axes = plt.subplots(figsize=SIZE)
    for label, trials in runs.items():
        costs, bests = best_so_far(trials, maximize)
        shown = [(c, b) for c, b in zip(costs, bests, strict=True) if b is not None]
        if shown:
            many = len(shown) > MANY_TRIALS
            marker = "" if many else "o"
            if many:  # no marker a trial: its corners alone draw the same line
                shown = step_corners(shown)
            axes.step(
                *zip(*shown, strict=True), where="post", marker=marker, markersize=3, label=label
            )
    if baseline is not None:
        axes.axhline(baseline, color="grey", linestyle=":", label="naive settings, same cluster")
    axes.set_xlabel("billable worker-seconds spent")
    axes.set_ylabel(f"best {metric} so far")
    axes.set_title("What tuning buys per worker-second")
    axes.grid(alpha=0.3)
    if axes.get_legend_handles_labels()[0]:  # no trial with a result: nothing to name
        axes.legend(fontsize="small")
    return _png(figure)


def pareto_front(
    front: Sequence[tuple[float, float, int]],
    others: Sequence[tuple[float, float]],
    axes_names: tuple[str, str],
    maximize_quality: bool,
) -> bytes:
    """Quality (y) against a cost (x): the front as a step line, each of its points labelled
    with its workers, and the other runs as dots."""
    cost, quality = axes_names
    figure, axes = plt.subplots(figsize=SIZE)
    if others:
        xs, ys = zip(*others, strict=True)
        axes.scatter(xs, ys, s=8, color="grey", alpha=0.4, label="other runs")
    points = sorted(front)
    xs, ys, _ = zip(*points, strict=True)
    axes.step(xs, ys, where="post", color="tab:red", marker="o", label="Pareto front")
    for x, y, workers in points:
        axes.annotate(f"{workers}w", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
    axes.set_xlabel(cost)
    axes.set_ylabel(quality + (" (higher is better)" if maximize_quality else " (lower is better)"))
    axes.set_title("The Pareto front: the runs no other beats on every objective")
    axes.grid(alpha=0.3)
    axes.legend(fontsize="small")
    return _png(figure)


def cluster_size(
    sizes: Sequence[int], scores: Sequence[float], walls: Sequence[float], metric: str
) -> bytes:
    """Validation score and wall time against the number of workers, same settings."""
    figure, left = plt.subplots(figsize=SIZE)
    left.plot(sizes, scores, marker="o", color="tab:blue")
    left.set_xlabel("workers")
    left.set_ylabel(metric, color="tab:blue")
    left.set_xticks(list(sizes))
    right = left.twinx()
    right.plot(sizes, walls, marker="s", color="tab:orange")
    right.set_ylabel("wall seconds", color="tab:orange")
    left.set_title("Cluster size: score and wall time (same settings)")
    left.grid(alpha=0.3)
    return _png(figure)
