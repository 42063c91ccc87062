"""Hyperband as brackets of asynchronous successive halving (ASHA, Li et al. 2020).

Bracket b's rungs sit at min_resource * eta**(b + k) for k = 0, 1, ... below max_resource:
bracket 0 judges trials earliest, the last bracket runs them all to max_resource. A trial's
bracket is drawn from (seed, trial number) alone, weighted as Hyperband weights its brackets.
When a trial first reaches a rung, it goes on only if its value is among the best
max(1, n // eta) of the n values recorded at that rung of its bracket so far (itself included).
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass, field

import numpy as np

from scaletune.spec import ObjectiveType
from scaletune.tuning._schedulers import CONTINUE, Decision, Verdict


@dataclass
class _Bracket:
    rungs: list[int]
    # rung -> values seen, kept sorted (ascending): a rank is one index, not a sort per report
    recorded: dict[int, list[float]] = field(default_factory=dict)


class HyperbandScheduler:
    def __init__(
        self,
        objective: ObjectiveType,
        *,
        min_resource: int,
        max_resource: int,
        eta: int = 3,
        seed: int = 0,
    ) -> None:
        if not 1 <= min_resource < max_resource:
            raise ValueError(
                f"need 1 <= min_resource < max_resource (got {min_resource}, {max_resource})"
            )
        if eta < 2:
            raise ValueError(f"eta must be 2 or more (got {eta})")
        self.min_resource, self.max_resource, self.eta = min_resource, max_resource, eta
        self._maximize = objective is ObjectiveType.MAXIMIZE
        self._seed = seed
        s_max = math.floor(math.log(max_resource / min_resource, eta) + 1e-9)
        self.brackets = [
            _Bracket(
                [r for k in range(s_max + 1) if (r := min_resource * eta ** (b + k)) < max_resource]
            )
            for b in range(s_max + 1)
        ]
        # Hyperband's trial counts per bracket, most aggressive first.
        counts = [
            math.ceil((s_max + 1) / (s_max - b + 1) * eta ** (s_max - b)) for b in range(s_max + 1)
        ]
        self._weights = np.asarray(counts, dtype=float) / sum(counts)
        self._trial_bracket: dict[int, int] = {}
        self._next_rung: dict[int, int] = {}  # trial -> index of the next rung it must pass

    def bracket_of(self, trial: int) -> int:
        if trial not in self._trial_bracket:
            rng = np.random.default_rng([self._seed, trial])
            self._trial_bracket[trial] = int(rng.choice(len(self.brackets), p=self._weights))
        return self._trial_bracket[trial]

    def on_report(self, trial: int, resource: int, value: float) -> Verdict:
        if resource >= self.max_resource:
            return Verdict(Decision.FINISH, f"reached max_resource={self.max_resource}")
        bracket = self.brackets[self.bracket_of(trial)]
        index = self._next_rung.setdefault(trial, 0)
        if index >= len(bracket.rungs) or resource < bracket.rungs[index]:
            return CONTINUE
        rung = bracket.rungs[index]
        self._next_rung[trial] = index + 1
        values = bracket.recorded.setdefault(rung, [])
        bisect.insort(values, value)
        keep = max(1, len(values) // self.eta)
        if (value >= values[-keep]) if self._maximize else (value <= values[keep - 1]):
            return CONTINUE
        return Verdict(
            Decision.STOP,
            f"bracket {self._trial_bracket[trial]} rung {rung}: {value:.6g} not in the best "
            f"{keep} of {len(values)}",
        )

    def on_end(self, trial: int) -> None:
        self._next_rung.pop(trial, None)
