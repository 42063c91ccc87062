"""Several objectives at once (quality, billable cost, wall time): which trials no other trial
beats on all of them (the Pareto front), their non-dominated ranks (for ranking a rung on
several objectives), and how much of the objective space a front covers (its hypervolume,
what comparisons of multi-objective tuners measure).

Pure functions over plain numbers: the tuner, the summaries and the benchmarks share them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Direction:
    name: str  # a reported metric, or billable_seconds / wall_seconds
    maximize: bool


def _minimized(values: Sequence[float], directions: Sequence[Direction]) -> tuple[float, ...]:
    """Every objective as one to minimise."""
    return tuple(-v if d.maximize else v for v, d in zip(values, directions, strict=True))


def dominates(a: Sequence[float], b: Sequence[float], directions: Sequence[Direction]) -> bool:
    """`a` is at least as good as `b` on every objective and better on one."""
    x, y = _minimized(a, directions), _minimized(b, directions)
    return all(p <= q for p, q in zip(x, y, strict=True)) and x != y


def non_dominated_ranks(
    points: Mapping[str, Sequence[float]], directions: Sequence[Direction]
) -> dict[str, int]:
    """Each point's front: 0 for the Pareto front, 1 for the front once it is removed, and
    so on (NSGA-II's non-dominated sorting; quadratic, which a rung's few hundred fit)."""
    remaining = dict(points)
    ranks: dict[str, int] = {}
    rank = 0
    while remaining:
        front = [
            key
            for key, value in remaining.items()
            if not any(dominates(other, value, directions) for other in remaining.values())
        ]
        for key in front:
            ranks[key] = rank
            del remaining[key]
        rank += 1
    return ranks


def pareto_front(
    points: Mapping[str, Sequence[float]], directions: Sequence[Direction]
) -> list[str]:
    """The keys on the front, best first by the first objective (ties kept: two trials with
    the same values are both on it)."""
    front = [key for key, rank in non_dominated_ranks(points, directions).items() if rank == 0]
    return sorted(front, key=lambda key: _minimized(points[key], directions))


def hypervolume(
    front: Sequence[Sequence[float]], reference: Sequence[float], directions: Sequence[Direction]
) -> float:
    """The volume the points dominate up to `reference` (a point worse than all on every
    objective), exactly, by slicing along the first objective (fine for the tens of points
    and two or three objectives a tuning job's front has)."""
    bound = _minimized(reference, directions)
    inside = [
        p
        for p in (_minimized(point, directions) for point in front)
        if all(v < b for v, b in zip(p, bound, strict=True))
    ]
    return _volume(inside, bound)


def _volume(points: list[tuple[float, ...]], bound: tuple[float, ...]) -> float:
    if not points:
        return 0.0
    if len(bound) == 1:
        return bound[0] - min(p[0] for p in points)
    ordered = sorted(points)
    total = 0.0
    for i, point in enumerate(ordered):
        upper = ordered[i + 1][0] if i + 1 < len(ordered) else bound[0]
        width = upper - point[0]
        if width > 0:  # the slab between this point and the next, covered by those before
            total += width * _volume([p[1:] for p in ordered[: i + 1]], bound[1:])
    return total
