"""Hyperband's bracket layout: each bracket's rungs, the chance of drawing each, and each
trial's draw.

Bracket b's rungs sit at min_resource * eta**(b + k) for k = 0, 1, ... below max_resource:
bracket 0 judges trials earliest, the last bracket runs them all to max_resource. A trial's
bracket is drawn from (seed, trial number) alone, weighted as Hyperband weights its brackets;
`brackets` keeps only the first (most aggressive) ones, 1 being plain ASHA. The tuner draws
with these; readers lay out a stored job's rungs with them."""

from __future__ import annotations

import math

import numpy as np

from scaletune.spec._names import bracket_rungs


def hyperband_brackets(
    min_resource: int, max_resource: int, eta: int, brackets: int | None = None
) -> tuple[list[list[int]], np.ndarray]:
    """Each bracket's rungs, most aggressive first, and the chance of drawing each."""
    if not 1 <= min_resource < max_resource:
        raise ValueError(
            f"need 1 <= min_resource < max_resource (got {min_resource}, {max_resource})"
        )
    if eta < 2:
        raise ValueError(f"eta must be 2 or more (got {eta})")
    s_max = math.floor(math.log(max_resource / min_resource, eta) + 1e-9)
    count = s_max + 1 if brackets is None else brackets
    if not 1 <= count <= s_max + 1:
        raise ValueError(f"brackets must be within [1, {s_max + 1}] (got {brackets})")
    rungs = [bracket_rungs(min_resource, max_resource, eta, b) for b in range(count)]
    # Hyperband's trial counts per bracket, most aggressive first.
    counts = [math.ceil((s_max + 1) / (s_max - b + 1) * eta ** (s_max - b)) for b in range(count)]
    return rungs, np.asarray(counts, dtype=float) / sum(counts)


def draw_bracket(seed: int, trial: int, weights: np.ndarray) -> int:
    """A trial's bracket, from the seed and its number alone (restores draw it again)."""
    if len(weights) == 1:  # the default: no draw to make (a generator costs 0.1 ms)
        return 0
    rng = np.random.default_rng([seed, trial])
    return int(rng.choice(len(weights), p=weights))
