"""How well each rung's ranking foretells the final one, in hindsight: whether early stopping
at that rung can be trusted on this job.

Hyperband judges a trial at rungs (min_resource * eta**k below max_resource) and keeps
the best max(1, n // eta) of the n trials there. That pays only when the ranking at a rung
predicts the ranking at the end. Where it does not (round 1 of XGBoost ranks no learning rate
by AUC: the first tree's output is scaled by eta, and AUC only sees the order), the rung ranks
by the other ranges alone and stops the eventual winner as readily as any other.

For each rung, read from the stored learning curves of the job's objective (the first one,
with several), a trial's final value being its last report if it ran to its end (Completed):
- Kendall's tau-b between the values there and the final ones, over the trials that have
  both (1: the rung ranks them as the end does; 0: no better than chance);
- where the final winner ranked among every trial that reported at the rung, and whether it
  is among the best max(1, n // eta) that successive halving keeps.

A trial's value at a rung is its first report at or past the rung, and before the next one
(as a scheduler judges it); ranking by forecast (`rank_by`, as Hyperband's rungs do by
default), the value its reports up to that one point to at max_resource (`_forecast`), none
where it has fewer than a forecast needs, unless no later rung will have enough: then the value
itself, as the scheduler ranks it.

On a search that ran every trial to the end, this tells which first rung a Hyperband job of
the same kind could use. On a Hyperband job it can only see the trials that its rungs let run
to the end, so it flatters them.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from scaletune.analysis._forecast import forecast
from scaletune.analysis._kendall import kendall_tau
from scaletune.analysis._objectives import Goals
from scaletune.errors import InvalidInputError
from scaletune.spec._names import default_rank_by, forecasts_later
from scaletune.store import JobStatus, MetricPoint, Store

DEFAULT_MIN_RESOURCE = 1
DEFAULT_ETA = 3


@dataclass(frozen=True)
class RungAgreement:
    resource: int
    trials: int  # trials that reported at this rung
    pairs: int  # of them, those with a final value
    kendall_tau: float | None  # None with fewer than 2 pairs, or no spread on either side
    winner_rank: int | None  # 1 = best; None when the winner has no value at this rung
    keeps_winner: bool | None  # the winner among the best max(1, trials // eta)


@dataclass(frozen=True)
class RungReport:
    tuning_job_id: str
    metric: str
    maximize: bool
    min_resource: int
    max_resource: int  # the rungs sit below it
    eta: int
    rank_by: str  # "value" or "forecast": what a rung ranks
    finished: int  # trials that ran to their end (Completed): their last value is final
    winner: str | None  # of those, the one with the best final value
    winner_value: float | None
    winner_step: int | None  # where it ended
    rungs: list[RungAgreement]

    @property
    def safe_first_rung(self) -> int | None:
        """The lowest rung from which on no rung drops the winner: the smallest min_resource
        that, in hindsight, would not have stopped it. A rung where the winner has no value
        (it ended before it, or reported nothing in its span) does not judge it. None when
        the last rung that judges it drops it, or none judges it."""
        safe = None
        for rung in reversed(self.rungs):
            if rung.keeps_winner is False:
                break
            if rung.keeps_winner:
                safe = rung.resource
        return safe

    @property
    def last_judging_rung(self) -> int | None:
        """The highest rung where the winner has a value."""
        judged = [rung.resource for rung in self.rungs if rung.keeps_winner is not None]
        return judged[-1] if judged else None

    def to_json_dict(self) -> dict[str, Any]:
        return {
            **{key: value for key, value in asdict(self).items() if key != "rungs"},
            "safe_first_rung": self.safe_first_rung,
            "rungs": [asdict(rung) for rung in self.rungs],
        }


def rung_agreement(
    store: Store,
    tuning_id: str,
    *,
    min_resource: int | None = None,
    eta: int | None = None,
    rank_by: str | None = None,
) -> RungReport:
    """Each rung's agreement with the end (module doc). The rungs, and what they rank, are the
    job's own ([hyperband]) unless given; a job without them gets min_resource 1, eta 3 and
    values. They sit below [hyperband]'s max_resource, else below the longest finished
    curve's last step."""
    record = store.get_tuning_job(tuning_id)
    objectives = Goals.of_stored(record.spec_view).objectives
    objective = objectives[0]
    hyperband = record.spec_view.hyperband
    if rank_by is None:  # the job's; unset: Hyperband's default; no Hyperband: values
        own = None if hyperband is None else hyperband.rank_by
        rank_by = own or ("value" if hyperband is None else default_rank_by(len(objectives) > 1))
    if rank_by not in ("value", "forecast"):
        raise InvalidInputError(f"rank_by must be 'value' or 'forecast' (got {rank_by!r})")
    own_first, own_eta, own_top = (
        (None, None, None)
        if hyperband is None
        else (hyperband.min_resource, hyperband.eta, hyperband.max_resource)
    )
    first = _given(min_resource, own_first, DEFAULT_MIN_RESOURCE)
    factor = _given(eta, own_eta, DEFAULT_ETA)
    if first < 1:
        raise InvalidInputError(f"min_resource must be 1 or more (got {first})")
    if factor < 2:
        raise InvalidInputError(f"eta must be 2 or more (got {factor})")
    curves = {
        job: [p for p in points if math.isfinite(p.value)]
        for job, points in store.trials.curves(tuning_id, objective.metric).items()
    }
    completed = store.trials.rows(tuning_id, statuses=[JobStatus.COMPLETED])
    ends = {row.id: curves[row.id][-1] for row in completed if curves.get(row.id)}
    finals = {job: point.value for job, point in ends.items()}
    top = own_top or max((p.step for p in ends.values()), default=0)
    rungs: list[int] = []
    while first * factor ** len(rungs) < top:
        rungs.append(first * factor ** len(rungs))
    sign = 1.0 if objective.maximize else -1.0
    winner = max(finals, key=lambda job: sign * finals[job], default=None)
    agreements = []
    for index, (rung, following) in enumerate(zip(rungs, [*rungs[1:], top], strict=True)):
        no_forecast_later = not forecasts_later(rungs[index + 1 :])
        values = {
            job: value
            for job, points in curves.items()
            if (value := _at_rung(points, rung, following, rank_by, top, no_forecast_later))
            is not None
        }
        paired = [(values[job], finals[job]) for job in values if job in finals]
        rank = keeps = None
        if winner in values:
            rank = 1 + sum(sign * value > sign * values[winner] for value in values.values())
            keeps = rank <= max(1, len(values) // factor)
        agreements.append(
            RungAgreement(
                rung, len(values), len(paired), kendall_tau(*_columns(paired)), rank, keeps
            )
        )
    return RungReport(
        tuning_job_id=tuning_id,
        metric=objective.metric,
        maximize=objective.maximize,
        min_resource=first,
        max_resource=top,
        eta=factor,
        rank_by=rank_by,
        finished=len(finals),
        winner=winner,
        winner_value=None if winner is None else finals[winner],
        winner_step=None if winner is None else ends[winner].step,
        rungs=agreements,
    )


def _given(*choices: int | None) -> int:
    return next(int(choice) for choice in choices if choice is not None)


def _at_rung(
    points: list[MetricPoint],
    rung: int,
    following: int,
    rank_by: str,
    top: int,
    value_if_no_forecast: bool,
) -> float | None:
    """What the rung ranks of a curve: its first report at or past `rung`, before
    `following`, or where the reports up to that one point at `top` (that report's value
    where they point nowhere yet, if `value_if_no_forecast`)."""
    index = next((i for i, p in enumerate(points) if rung <= p.step < following), None)
    if index is None:
        return None
    if rank_by == "value":
        return points[index].value
    seen = points[: index + 1]
    ahead = forecast([p.step for p in seen], [p.value for p in seen], at=top)
    return points[index].value if ahead is None and value_if_no_forecast else ahead


def _columns(pairs: list[tuple[float, float]]) -> tuple[list[float], list[float]]:
    return [early for early, _ in pairs], [final for _, final in pairs]
