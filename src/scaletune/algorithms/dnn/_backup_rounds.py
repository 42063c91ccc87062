"""All-reduce rounds with backup workers (Chen et al. 2016, "Revisiting distributed
synchronous SGD", on all-reduce): round r takes the gradients of the first N - b ranks to
finish theirs and drops the rest, so a slow rank no longer holds every round.

A collective needs every rank, so each rank runs its side of the rounds on a thread of its
own (`BackupRounds`) while its training thread computes. A rank claims a place in round r
with one atomic add on the job's store; the (N - b)-th claim marks the round full. Each
rank's round thread waits for that mark, then takes part in the round's all-reduce with its
claimed gradient, or zeros where it has none (its gradient is still being computed, or came
after the round filled and is dropped: never applied to later weights). Every rank applies
every round's mean, so the weights stay the same everywhere. A rank that is slow in its
computing still keeps pace in the rounds; a rank stopped whole (its process frozen) holds
them, as it holds any collective, until the collective timeout fails the attempt.

What travels with each round's gradients, summed over the ranks: the loss of the gradients
taken, the gradients dropped since the last round, whether a rank wants to stop or a
checkpoint is due by its clock, and every rank's place in its shard (for the checkpoint)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta

import torch
import torch.distributed as dist

# After the gradient: taken (1/0), loss sum, examples, dropped, stop, checkpoint due; then
# (epoch, index) per rank.
_TAKEN, _LOSS, _EXAMPLES, _DROPPED, _STOP, _DUE = range(6)
_SCALARS = 6
BACKSTOP_SECONDS = 5.0


class BackupRoundsError(RuntimeError):
    """A round failed: a peer lost, or no round filled within the collective timeout."""


@dataclass(frozen=True)
class Contribution:
    """A rank's gradient for a round (flat, float32, on the CPU) and the loss it came from."""

    gradient: torch.Tensor
    loss_sum: float
    examples: int


@dataclass(frozen=True)
class ShardPlace:
    """Where a rank is in its shard: the epoch under way and the updates taken from it."""

    epoch: int
    index: int


@dataclass(frozen=True)
class RoundResult:
    mean: torch.Tensor  # of the gradients the round took
    taken: int
    loss_sum: float
    examples: int
    dropped: int  # gradients that came after their round, since the round before
    stop: bool
    checkpoint_due: bool
    places: tuple[ShardPlace, ...]  # every rank's, by rank


class BackupRounds:
    """One rank's side of the rounds `first` .. `end - 1` (fewer where a stop ends them).

    `claims` and `waits` are two connections to the job's store (the training thread claims
    while the round thread waits); `reduce` sums a tensor over every rank, in place."""

    def __init__(
        self,
        *,
        claims: dist.Store,
        waits: dist.Store,
        reduce: Callable[[torch.Tensor], None],
        rank: int,
        world_size: int,
        needed: int,
        size: int,
        first: int,
        end: int,
        timeout: timedelta,
        place: ShardPlace,
    ) -> None:
        """`place`: this rank's in its shard as the rounds start (a resumed attempt's)."""
        self._claims, self._waits, self._reduce = claims, waits, reduce
        self._rank, self._world_size, self._needed, self._size = rank, world_size, needed, size
        self._first, self._end, self._timeout = first, end, timeout
        self._state = threading.Condition()
        self._closed_below = first  # rounds below this one take no more claims here
        self._offers: dict[int, Contribution] = {}
        self._results: dict[int, RoundResult] = {}
        self._dropped = 0
        self._stop = False
        self._checkpoint_due = False
        self._place = place  # rounds before this rank computes carry where it starts
        self._ended_at: int | None = None  # the first round not run (the end, or after a stop)
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="backup-rounds", daemon=True)

    def __enter__(self) -> BackupRounds:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        # Normally the thread has run its last round; after an error the attempt ends anyway
        # (the process group's teardown, then the process, unblock it).
        self._thread.join(timeout=None if exc[0] is None else 1.0)

    # Called by the training thread.
    def note(self, *, stop: bool, checkpoint_due: bool, place: ShardPlace) -> None:
        """This rank's wishes and place, for the next round that starts here."""
        with self._state:
            self._stop = self._stop or stop
            self._checkpoint_due = self._checkpoint_due or checkpoint_due
            self._place = place

    def taken_without_this_rank(self, round_: int) -> bool:
        """Whether round `round_` is already full or ended, so a gradient computed for it now
        would be dropped: the training thread skips to its result instead."""
        with self._state:
            if round_ < self._closed_below or self._ended_by(round_):
                return True
        return bool(self._claims.check([_full_key(round_)]))

    def offer(self, round_: int, contribution: Contribution) -> bool:
        """Claims a place in the round for this gradient: False where it came too late (it
        is dropped and counted)."""
        with self._state:
            if round_ >= self._closed_below and not self._ended_by(round_):
                place = self._claims.add(_claims_key(round_), 1)
                if place == self._needed:
                    self._claims.set(_full_key(round_), "1")
                if place <= self._needed:
                    self._offers[round_] = contribution
                    return True
            self._dropped += 1
            return False

    def result(self, round_: int) -> RoundResult | None:
        """The round's result once every rank has taken part; None where the rounds ended
        before it (a stop)."""
        # The round thread fails by the store's and the group's timeouts first; this one is a
        # backstop past both.
        backstop = 2 * self._timeout.total_seconds() + BACKSTOP_SECONDS
        with self._state:
            arrived = self._state.wait_for(
                lambda: (
                    round_ in self._results or self._ended_by(round_) or self._failure is not None
                ),
                timeout=backstop,
            )
            if self._failure is not None:
                raise BackupRoundsError(f"round {round_}: {self._failure}") from self._failure
            if not arrived:
                raise BackupRoundsError(f"round {round_} had no result within {backstop:g} s")
            return self._results.pop(round_, None)

    def _ended_by(self, round_: int) -> bool:
        return self._ended_at is not None and round_ >= self._ended_at

    # The round thread.
    def _run(self) -> None:
        round_ = self._first
        try:
            while round_ < self._end:
                result = self._round(round_)
                round_ += 1
                with self._state:
                    self._results[round_ - 1] = result
                    self._state.notify_all()
                if result.stop:
                    break
        except BaseException as error:  # the training thread raises it
            with self._state:
                self._failure = error
                self._state.notify_all()
            return
        with self._state:
            self._ended_at = round_
            self._state.notify_all()

    def _round(self, round_: int) -> RoundResult:
        try:
            self._waits.wait([_full_key(round_)], self._timeout)
        except RuntimeError as error:  # torch's store timeout or a lost store
            raise BackupRoundsError(
                f"fewer than {self._needed} of {self._world_size} gradients in round {round_} "
                f"within {self._timeout.total_seconds():g} s ({error})"
            ) from error
        with self._state:
            self._closed_below = round_ + 1
            offered = self._offers.pop(round_, None)
            vector = torch.zeros(self._size + _SCALARS + 2 * self._world_size)
            if offered is not None:
                vector[: self._size] = offered.gradient
                taken = (1.0, offered.loss_sum, float(offered.examples))
                vector[self._size : self._size + 3] = torch.tensor(taken)
            flags = (float(self._dropped), float(self._stop), float(self._checkpoint_due))
            vector[self._size + _DROPPED : self._size + _SCALARS] = torch.tensor(flags)
            at = self._size + _SCALARS + 2 * self._rank
            vector[at : at + 2] = torch.tensor([self._place.epoch, self._place.index])
            self._dropped, self._checkpoint_due = 0, False
        self._reduce(vector)
        if self._rank == 0:  # every rank has closed the round: its keys are read no more
            for key in (_claims_key(round_), _full_key(round_)):
                self._waits.delete_key(key)
        scalars = vector[self._size : self._size + _SCALARS].tolist()
        taken = round(scalars[_TAKEN])
        if taken != self._needed:
            raise BackupRoundsError(f"round {round_} took {taken} gradients, not {self._needed}")
        places = vector[self._size + _SCALARS :].round().int().tolist()
        return RoundResult(
            mean=vector[: self._size] / taken,
            taken=taken,
            loss_sum=scalars[_LOSS],
            examples=round(scalars[_EXAMPLES]),
            dropped=round(scalars[_DROPPED]),
            stop=scalars[_STOP] > 0,
            checkpoint_due=scalars[_DUE] > 0,
            places=tuple(
                ShardPlace(places[2 * rank], places[2 * rank + 1])
                for rank in range(self._world_size)
            ),
        )


def _claims_key(round_: int) -> str:
    return f"claims/{round_}"


def _full_key(round_: int) -> str:
    return f"full/{round_}"
