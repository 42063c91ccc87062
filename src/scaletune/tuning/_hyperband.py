"""Hyperband as brackets of asynchronous successive halving (ASHA, Li et al. 2020).

Bracket b's rungs sit at min_resource * eta**(b + k) for k = 0, 1, ... below max_resource:
bracket 0 judges trials earliest, the last bracket runs them all to max_resource. A trial's
bracket is drawn from (seed, trial number) alone, weighted as Hyperband weights its brackets;
`brackets` keeps only the first (most aggressive) ones, 1 being plain ASHA.

Adaptive bracket weights (Hyper-Tune's idea, Li et al. 2022): a bracket pays off when the
ranking at its first rung predicts the ranking at max_resource; when it does not, its early
verdicts are coin flips that waste its trials. So each bracket's Hyperband weight is scaled by
Kendall's tau between the values its first rung saw and the final values, over the (latest
200) trials that reported both, once there are 8 such trials (before that, and for the last
bracket, which judges nothing early, the weight is Hyperband's). A tau at or below 0 leaves a
bracket 5 % of its weight, so it can still show that it became useful.

When a trial first reaches a rung, it goes on if its value is among the best max(1, n // eta)
of the n values recorded at that rung of its bracket so far (itself included). If not:
- stopping type: it is stopped for good;
- promotion type: it pauses. Whenever a slot frees, `promote` first looks for a paused trial
  that now ranks among its rung's best n // eta (as later trials fill the rung below it, the
  bar moves), highest rung first, and that one resumes from its checkpoint; only when there
  is none does a new trial start. A trial that ranks at once goes on without pausing.

Ranking by forecast (`rank_by="forecast"`, `_forecast`): what a rung records and ranks is not
the trial's value there but the value its reports so far point to at max_resource, so that a
slow learner that will end first is not stopped for standing low early. A rung where the trial
has fewer reports than a curve fit needs judges nothing: it goes on.

With several objectives (quality, billable seconds, wall time), a rung holds each trial's
point: the objective's value there and the other objectives as they stood when it got there
(a reported metric's latest value; the seconds it has run, on all its tasks for billable
seconds). Ranking at a rung is then by random scalarisation, as in multi-objective ASHA
(Schmucker et al. 2021): each trial draws its own trade-off, a weight per objective (from the
seed and its number), and goes on if its Chebyshev distance to the rung's ideal point
(objectives scaled to the rung's range) is among the best max(1, n // eta) of the rung's
points under those weights. Trials judged by different trade-offs survive at different
places along the front, so the survivors spread over it instead of crowding one end; a
pass costs one pass over the rung's points, not a non-dominated sort of them.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from scaletune.spec import HyperbandType, ObjectiveType, RankBy
from scaletune.tuning._forecast import forecast
from scaletune.tuning._pareto import Direction
from scaletune.tuning._schedulers import CONTINUE, Decision, Verdict


class _Points:
    """A rung's points (every objective as one to minimise), in a growing array: a ranking
    is one vectorised pass, not a conversion of a list per report."""

    def __init__(self, width: int) -> None:
        self._rows = np.empty((16, width))
        self._count = 0
        self._index: dict[int, int] = {}  # trial -> its row

    def add(self, trial: int, point: np.ndarray) -> None:
        if self._count == len(self._rows):
            self._rows = np.concatenate([self._rows, np.empty_like(self._rows)])
        self._rows[self._count] = point
        self._index[trial] = self._count
        self._count += 1

    def of(self, trial: int) -> np.ndarray:
        return np.asarray(self._rows[self._index[trial]])

    @property
    def array(self) -> np.ndarray:
        return self._rows[: self._count]


@dataclass
class _Bracket:
    rungs: list[int]
    # rung -> values seen, kept sorted (ascending): a rank is one index, not a sort per report
    recorded: dict[int, list[float]] = field(default_factory=dict)
    # rung -> the trials paused there, as (value, trial), sorted (ascending)
    paused: dict[int, list[tuple[float, int]]] = field(default_factory=dict)
    # rung -> every objective's value of the trials there (several objectives only)
    points: dict[int, _Points] = field(default_factory=dict)


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
    rungs = [
        [r for k in range(s_max + 1) if (r := min_resource * eta ** (b + k)) < max_resource]
        for b in range(count)
    ]
    # Hyperband's trial counts per bracket, most aggressive first.
    counts = [math.ceil((s_max + 1) / (s_max - b + 1) * eta ** (s_max - b)) for b in range(count)]
    return rungs, np.asarray(counts, dtype=float) / sum(counts)


def draw_bracket(seed: int, trial: int, weights: np.ndarray) -> int:
    """A trial's bracket, from the seed and its number alone (restores draw it again)."""
    if len(weights) == 1:  # the default: no draw to make (a generator costs 0.1 ms)
        return 0
    rng = np.random.default_rng([seed, trial])
    return int(rng.choice(len(weights), p=weights))


BracketWeights = Literal["hyperband", "adaptive"]
_RECENT = 200  # trials that reached max_resource, the latest first, that the tau is taken over
_MIN_PAIRS = 8  # trials with both values before a bracket's weight moves
_FLOOR = 0.05  # what a bracket whose first rung ranks nothing keeps of its weight


def kendall_tau(x: np.ndarray, y: np.ndarray) -> float:
    """Kendall's tau-a: concordant minus discordant pairs, over all pairs."""
    n = len(x)
    if n < 2:
        return 0.0
    agree = np.sign(x[:, None] - x[None, :]) * np.sign(y[:, None] - y[None, :])
    return float(agree[np.triu_indices(n, 1)].mean())


class HyperbandScheduler:
    def __init__(
        self,
        objective: ObjectiveType,
        *,
        min_resource: int,
        max_resource: int,
        eta: int = 3,
        seed: int = 0,
        brackets: int | None = None,
        kind: HyperbandType = HyperbandType.STOPPING,
        bracket_weights: BracketWeights = "hyperband",
        rank_by: RankBy = "value",
        objectives: Sequence[Direction] | None = None,
    ) -> None:
        rungs, self._weights = hyperband_brackets(min_resource, max_resource, eta, brackets)
        # Several objectives, the primary first (module doc); None or one: the value alone.
        self._objectives = list(objectives) if objectives and len(objectives) > 1 else None
        self._trade_offs: dict[int, np.ndarray] = {}  # trial -> its weight per objective
        self._adaptive = bracket_weights == "adaptive"
        # trial -> its (steps, values) so far, while it has rungs ahead (forecasts only)
        self._curves: dict[int, tuple[list[int], list[float]]] | None = (
            {} if rank_by == "forecast" else None
        )
        self._first_rungs = {r[0]: b for b, r in enumerate(rungs) if r}  # step -> bracket
        self._at_first_rungs: dict[int, dict[int, float]] = {}  # trial -> step -> value
        self._finals: dict[int, float] = {}  # trial -> value at max_resource, in order
        self._adapted: tuple[int, np.ndarray] | None = None  # (finals then, weights)
        self.min_resource, self.max_resource, self.eta = min_resource, max_resource, eta
        self.kind = kind
        self._maximize = objective is ObjectiveType.MAXIMIZE
        self._seed = seed
        self.brackets = [_Bracket(r) for r in rungs]
        self._trial_bracket: dict[int, int] = {}
        self._next_rung: dict[int, int] = {}  # trial -> index of the next rung it must pass
        self._paused_at: dict[int, tuple[int, int, float]] = {}  # trial -> bracket, rung, value

    def bracket_of(self, trial: int) -> int:
        if trial not in self._trial_bracket:
            self._trial_bracket[trial] = draw_bracket(self._seed, trial, self.bracket_weights())
        return self._trial_bracket[trial]

    def bracket(self, trial: int) -> int | None:
        """The trial's bracket, once drawn (at its first report)."""
        return self._trial_bracket.get(trial)

    def bracket_weights(self) -> np.ndarray:
        """The chance of drawing each bracket now: Hyperband's, or adapted (module doc)."""
        if not self._adaptive or len(self._finals) < _MIN_PAIRS:
            return self._weights
        if self._adapted is not None and self._adapted[0] == len(self._finals):
            return self._adapted[1]
        recent = list(self._finals)[-_RECENT:]
        weights = self._weights.copy()
        for step, number in self._first_rungs.items():
            pairs = [
                (self._at_first_rungs[t][step], self._finals[t])
                for t in recent
                if step in self._at_first_rungs.get(t, {})
            ]
            if len(pairs) >= _MIN_PAIRS:
                early, final = np.asarray(pairs).T
                weights[number] *= max(kendall_tau(early, final), _FLOOR)
        weights /= weights.sum()
        self._adapted = (len(self._finals), weights)
        return weights

    def _measure(self, trial: int, resource: int, value: float) -> None:
        """What the adaptive weights need: values at first rungs, and final values."""
        if resource >= self.max_resource:
            self._finals.setdefault(trial, value)
        elif resource in self._first_rungs:
            self._at_first_rungs.setdefault(trial, {}).setdefault(resource, value)

    @property
    def paused(self) -> list[int]:
        """The trials paused now, waiting for a promotion."""
        return list(self._paused_at)

    def on_report(
        self, trial: int, resource: int, value: float, others: Sequence[float] = ()
    ) -> Verdict:
        # Reports between a pause and the moment the trial stops change nothing. One that
        # passes its next rung or the end shows it was promoted (a restore replays that).
        if self._adaptive:
            self._measure(trial, resource, value)
        if resource >= self.max_resource:
            self._unpause(trial)
            return Verdict(Decision.FINISH, f"reached max_resource={self.max_resource}")
        number = self.bracket_of(trial)
        bracket = self.brackets[number]
        index = self._next_rung.setdefault(trial, 0)
        if self._curves is not None and index < len(bracket.rungs):  # past them: not needed
            steps, values = self._curves.setdefault(trial, ([], []))
            kept = bisect.bisect_left(steps, resource)  # a resumed attempt reports anew
            del steps[kept:], values[kept:]
            steps.append(resource)
            values.append(value)
        if index >= len(bracket.rungs) or resource < bracket.rungs[index]:
            return CONTINUE
        self._unpause(trial)
        rung = bracket.rungs[index]
        self._next_rung[trial] = index + 1
        if self._curves is not None:
            curve = self._curves[trial]
            if index + 1 == len(bracket.rungs):  # its last rung: the curve is not needed again
                del self._curves[trial]
            ahead = forecast(*curve, at=self.max_resource)
            if ahead is None:
                return CONTINUE  # too few reports to forecast: this rung judges nothing
            value = ahead
        values = bracket.recorded.setdefault(rung, [])
        bisect.insort(values, value)
        keep = max(1, len(values) // self.eta)
        if self._objectives is not None:
            points = bracket.points.setdefault(rung, _Points(len(self._objectives)))
            points.add(trial, self._minimised(value, others))
        if self._passes(bracket, rung, trial, value, keep):
            return CONTINUE
        what = f"{value:.6g}" if self._curves is None else f"forecast {value:.6g}"
        judged = f"bracket {number} rung {rung}: {what} not in the best {keep} of {len(values)}"
        if self.kind is HyperbandType.STOPPING:
            return Verdict(Decision.STOP, judged)
        bisect.insort(bracket.paused.setdefault(rung, []), (value, trial))
        self._paused_at[trial] = (number, rung, value)
        return Verdict(Decision.PAUSE, f"{judged}: paused until it is")

    def promote(self) -> int | None:
        """A paused trial that now ranks among its rung's best n // eta, to resume now (the
        highest rung first, the best value within it); None if there is none."""
        chosen: tuple[int, _Bracket, int] | None = None  # rung, bracket, trial
        for bracket in self.brackets:
            for rung, paused in bracket.paused.items():
                if not paused or (chosen is not None and rung <= chosen[0]):
                    continue
                keep = len(bracket.recorded[rung]) // self.eta
                if keep < 1:
                    continue
                # One objective: the best paused value is the one to try. Several: each
                # paused trial is judged by its own trade-off.
                if self._objectives is None:
                    candidates = [paused[-1] if self._maximize else paused[0]]
                else:
                    candidates = paused
                for value, trial in candidates:
                    if self._passes(bracket, rung, trial, value, keep):
                        chosen = (rung, bracket, trial)
                        break
        if chosen is None:
            return None
        self._unpause(chosen[2])
        return chosen[2]

    def on_resumed(self, trial: int) -> None:
        """A paused trial goes on (resumed after a restart): it counts as promoted."""
        self._unpause(trial)

    def on_end(self, trial: int) -> None:
        self._next_rung.pop(trial, None)
        if self._curves is not None:
            self._curves.pop(trial, None)
        self._unpause(trial)

    def _passes(self, bracket: _Bracket, rung: int, trial: int, value: float, keep: int) -> bool:
        """Among the rung's best `keep`: by value, or by the trial's own trade-off."""
        if self._objectives is None:
            values = bracket.recorded[rung]
            return value >= values[-keep] if self._maximize else value <= values[keep - 1]
        points = bracket.points[rung]
        everyone = points.array
        finite = np.isfinite(everyone)
        low = np.where(finite, everyone, np.inf).min(axis=0)
        high = np.where(finite, everyone, -np.inf).max(axis=0)
        low, high = np.where(np.isfinite(low), low, 0.0), np.where(np.isfinite(high), high, 0.0)
        span = np.where(high > low, high - low, 1.0)
        weights = self._trade_off(trial)

        def distance(rows: np.ndarray) -> np.ndarray:
            scaled = np.where(np.isfinite(rows), (rows - low) / span, 1.0)  # unknown: worst
            return np.asarray((scaled * weights).max(axis=-1))

        return int((distance(everyone) < distance(points.of(trial))).sum()) < keep

    def _minimised(self, value: float, others: Sequence[float]) -> np.ndarray:
        """A point with every objective to minimise; one not known yet counts as the worst."""
        assert self._objectives is not None
        raw = [value, *others][: len(self._objectives)]
        raw += [math.nan] * (len(self._objectives) - len(raw))
        point = np.array(
            [-v if d.maximize else v for v, d in zip(raw, self._objectives, strict=True)]
        )
        return np.where(np.isnan(point), np.inf, point)

    def _trade_off(self, trial: int) -> np.ndarray:
        if trial not in self._trade_offs:
            rng = np.random.default_rng([self._seed, trial, 7])
            assert self._objectives is not None
            self._trade_offs[trial] = rng.dirichlet(np.ones(len(self._objectives)))
        return self._trade_offs[trial]

    def _unpause(self, trial: int) -> None:
        where = self._paused_at.pop(trial, None)
        if where is not None:
            number, rung, value = where
            self.brackets[number].paused[rung].remove((value, trial))
