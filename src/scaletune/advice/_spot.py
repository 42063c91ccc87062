"""What a job would cost on spot capacity: its own measured step times and restart time run
through a preemption process, for three mixes (all on-demand; elastic, all on spot; mixed:
its fewest on-demand, the rest spot), each acting on the notices as scaletune does.

The simulation, one run: the job trains at its size's step time; a spot machine's preemption
is acted on at its notice if the notice is at least a step long (the workers save a
checkpoint at their next step: nothing lost), else at the machine's end (the work since the
last periodic checkpoint lost); either way the job goes on at the size left, after a restart
(the run's measured time outside steps), not below its fewest (it waits for capacity). A
machine's capacity comes back some time after it went, and the job grows back onto it, after
a restart. Billing is each period's workers on their class, as the controller bills: a
restart's time at the size it restarts at, waiting unbilled. The preemptions are a trace (a
run's own, to check the prediction) or drawn as a Poisson process per spot machine."""

from __future__ import annotations

import heapq
import math
import random
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any


class Mix(StrEnum):
    ON_DEMAND = "on-demand"  # a fixed-size job on on-demand capacity
    SPOT = "elastic spot"  # an elastic job, every worker on spot capacity
    MIXED = "mixed"  # an elastic job, its fewest workers on-demand and the rest spot


@dataclass(frozen=True)
class JobShape:
    """What the simulation needs of a job, from its measured run."""

    steps: float  # to its quality
    step_seconds: Callable[[int], float]  # a step's time on n workers
    restart_seconds: float  # an attempt's time outside steps: placed, loaded, resumed
    checkpoint_seconds: float  # between periodic checkpoints (inf: none)
    most: int
    fewest: int


@dataclass(frozen=True)
class SpotMarket:
    preemptions_per_hour: float  # per spot machine (one worker's)
    notice_seconds: float  # before a preempted machine goes
    back_after_seconds: float  # until a preempted machine's capacity returns
    spot_price: float  # a spot worker-second's price, in on-demand worker-seconds


@dataclass(frozen=True)
class Preemption:
    """A spot machine goes `at` seconds into the job, with `notice` seconds of notice; its
    capacity is back `back_after` seconds later."""

    at: float
    notice: float
    back_after: float


@dataclass(frozen=True)
class MixOutcome:
    wall_seconds: float
    on_demand_seconds: float  # billable worker-seconds on each class
    spot_seconds: float
    steps_redone: float
    preemptions: int

    def cost(self, spot_price: float) -> float:
        """In on-demand worker-seconds."""
        return self.on_demand_seconds + spot_price * self.spot_seconds


def simulate(shape: JobShape, mix: Mix, events: Sequence[Preemption]) -> MixOutcome:
    """One run of the job on `mix` under these preemptions (of its spot machines)."""
    held = {Mix.ON_DEMAND: shape.most, Mix.SPOT: 0, Mix.MIXED: shape.fewest}[mix]
    spot_machines = shape.most - held
    queue: list[tuple[float, int, str]] = []
    taken = 0
    for index, event in enumerate(events if spot_machines else ()):
        acts_early = event.notice >= shape.step_seconds(shape.most)
        heapq.heappush(queue, (event.at - event.notice if acts_early else event.at, index, "go"))
    run = _Run(shape, held, spot_machines)
    while run.progress < shape.steps:
        finish = run.time_to_finish()
        if not queue or queue[0][0] >= run.t + finish:
            if math.isinf(finish):  # waiting for capacity that never comes back
                return MixOutcome(math.inf, run.on_demand, run.spot, run.redone, taken)
            run.advance(run.t + finish)
            break
        when, index, kind = heapq.heappop(queue)
        run.advance(max(when, run.t))
        event = events[index]
        if kind == "back":
            run.machine_back()
            continue
        if run.spot_up == 0:  # none of its machines left to lose (the event is another's)
            continue
        taken += 1
        lost = event.notice < shape.step_seconds(run.size)
        run.machine_gone(lost)
        heapq.heappush(queue, (event.at + event.back_after, index, "back"))
    return MixOutcome(run.t, run.on_demand, run.spot, run.redone, taken)


class _Run:
    """One simulated run's state: time, steps done and saved, machines up, billing."""

    def __init__(self, shape: JobShape, held: int, spot_machines: int) -> None:
        self.shape, self.held = shape, held
        self.spot_up = spot_machines
        self.t = self.progress = self.saved = self.redone = 0.0
        self.on_demand = self.spot = 0.0
        self.restart_left = shape.restart_seconds  # the first start
        self.since_checkpoint = 0.0  # training seconds since the last periodic checkpoint

    @property
    def size(self) -> int:
        return min(self.shape.most, self.held + self.spot_up)

    @property
    def waiting(self) -> bool:
        return self.size < self.shape.fewest

    def time_to_finish(self) -> float:
        if self.waiting:
            return math.inf
        left = (self.shape.steps - self.progress) * self.shape.step_seconds(self.size)
        return self.restart_left + left

    def advance(self, until: float) -> None:
        span = until - self.t
        if span <= 0:
            return
        self.t = until
        if self.waiting:
            return
        on_demand = min(self.size, self.held)
        self.on_demand += on_demand * span
        self.spot += (self.size - on_demand) * span
        restarting = min(span, self.restart_left)
        self.restart_left -= restarting
        training = span - restarting
        if training <= 0:
            return
        step = self.shape.step_seconds(self.size)
        self.progress = min(self.shape.steps, self.progress + training / step)
        self.since_checkpoint += training
        every = self.shape.checkpoint_seconds
        if self.since_checkpoint >= every:  # the latest periodic checkpoint, in steps
            self.since_checkpoint %= every
            self.saved = max(self.saved, self.progress - self.since_checkpoint / step)

    def _restart(self) -> None:
        self.restart_left = self.shape.restart_seconds
        self.since_checkpoint = 0.0
        self.saved = self.progress

    def machine_gone(self, lost: bool) -> None:
        if lost:  # too short a notice: from the latest checkpoint
            self.redone += self.progress - self.saved
            self.progress = self.saved
        self.spot_up -= 1
        self._restart()

    def machine_back(self) -> None:
        was = self.size
        self.spot_up += 1
        if self.size != was:  # it grows at a checkpoint its workers save as they stop
            self._restart()


def draw_preemptions(
    market: SpotMarket, machines: int, horizon: float, rng: random.Random
) -> list[Preemption]:
    """A Poisson process of preemptions for each spot machine, over `horizon` seconds; a
    machine is preempted again only once it is back."""
    rate = market.preemptions_per_hour / 3600.0
    events: list[Preemption] = []
    if rate <= 0:
        return events
    for _ in range(machines):
        at = rng.expovariate(rate)
        while at < horizon:
            events.append(Preemption(at, market.notice_seconds, market.back_after_seconds))
            at += market.back_after_seconds + rng.expovariate(rate)
    return sorted(events, key=lambda event: event.at)


@dataclass(frozen=True)
class MixPrediction:
    mix: Mix
    wall_seconds: float  # the mean over the runs drawn
    cost: float  # on-demand worker-seconds, the mean
    cost_p90: float
    on_demand_seconds: float
    spot_seconds: float
    steps_redone: float
    preemptions: float

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "mix": self.mix.value,
            "wall_seconds": self.wall_seconds,
            "cost_in_on_demand_worker_seconds": self.cost,
            "cost_p90": self.cost_p90,
            "on_demand_worker_seconds": self.on_demand_seconds,
            "spot_worker_seconds": self.spot_seconds,
            "steps_redone": self.steps_redone,
            "preemptions": self.preemptions,
        }


def predict_mixes(
    shape: JobShape, market: SpotMarket, *, runs: int = 200, seed: int = 0
) -> list[MixPrediction]:
    """Each mix's mean wall time and cost over `runs` drawn preemption processes."""
    rng = random.Random(seed)
    outcomes: dict[Mix, list[MixOutcome]] = {mix: [] for mix in Mix}
    plain = simulate(shape, Mix.ON_DEMAND, ())
    horizon = 20 * plain.wall_seconds + 10 * market.back_after_seconds  # past any end
    for _ in range(runs):
        events = draw_preemptions(market, shape.most, horizon, rng)
        for mix in Mix:
            outcomes[mix].append(simulate(shape, mix, events))
    predictions = []
    for mix, runs_of_mix in outcomes.items():
        costs = sorted(outcome.cost(market.spot_price) for outcome in runs_of_mix)
        predictions.append(
            MixPrediction(
                mix=mix,
                wall_seconds=statistics.fmean(o.wall_seconds for o in runs_of_mix),
                cost=statistics.fmean(costs),
                cost_p90=costs[min(len(costs) - 1, int(0.9 * len(costs)))],
                on_demand_seconds=statistics.fmean(o.on_demand_seconds for o in runs_of_mix),
                spot_seconds=statistics.fmean(o.spot_seconds for o in runs_of_mix),
                steps_redone=statistics.fmean(o.steps_redone for o in runs_of_mix),
                preemptions=statistics.fmean(o.preemptions for o in runs_of_mix),
            )
        )
    return predictions


def recommend_mix(predictions: Sequence[MixPrediction], max_time_ratio: float) -> Mix:
    """The cheapest mix whose wall time is within `max_time_ratio` of on-demand's."""
    on_demand = next(p for p in predictions if p.mix is Mix.ON_DEMAND)
    fast_enough = [
        p for p in predictions if p.wall_seconds <= max_time_ratio * on_demand.wall_seconds
    ]
    return min(fast_enough, key=lambda p: (p.cost, p.wall_seconds)).mix


@dataclass(frozen=True)
class SpotAdvice:
    """What the job would cost on each mix in this market, and the mix to choose."""

    market: SpotMarket
    fewest: int  # the elastic mixes' floor (the mixed one's on-demand workers)
    predictions: list[MixPrediction]
    recommended: Mix
    max_time_ratio: float

    def prediction(self, mix: Mix) -> MixPrediction:
        return next(p for p in self.predictions if p.mix is mix)

    def to_json_dict(self) -> dict[str, Any]:
        return {
            "preemptions_per_hour": self.market.preemptions_per_hour,
            "notice_seconds": self.market.notice_seconds,
            "back_after_seconds": self.market.back_after_seconds,
            "spot_price": self.market.spot_price,
            "fewest_workers": self.fewest,
            "max_time_ratio": self.max_time_ratio,
            "recommended_mix": self.recommended.value,
            "mixes": [p.to_json_dict() for p in self.predictions],
        }
