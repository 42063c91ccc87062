"""How well one ranking foretells another: Kendall's tau-b, the tuner's measure of a rung (its
adaptive bracket weights) and the report's (`tuning rungs`) alike."""

from __future__ import annotations

import math
from collections.abc import Sequence


def kendall_tau(early: Sequence[float], final: Sequence[float]) -> float | None:
    """Concordant minus discordant pairs, ties accounted for (tau-b): 1 when the rankings
    agree, 0 when one tells nothing of the other. None with fewer than 2 pairs, or when
    either side has no spread."""
    if len(early) < 2:
        return None
    from scipy.stats import kendalltau  # O(n log n); a reader loads it only for this

    tau = float(kendalltau(early, final).statistic)
    return None if math.isnan(tau) else tau
