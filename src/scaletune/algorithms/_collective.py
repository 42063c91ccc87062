"""What the ranks of a gradient-boosting job share besides the trees: XGBoost's collective
(through the tracker the rendezvous starts), in which they agree, every few rounds, on
stopping and on checkpoints. XGBoost grows its trees in the same collective; LightGBM grows
them over its own network and agrees here."""

from __future__ import annotations

import bisect
import contextlib
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import xgboost as xgb
from xgboost import collective

from scaletune.worker import WorkerContext

AGREE_EVERY_SECONDS = 0.05  # how often the ranks agree on stopping: a stop lands this late
MOST_ROUNDS_APART = 8  # and this many rounds late at most, however fast the rounds


def communicator(ctx: WorkerContext) -> contextlib.AbstractContextManager[Any]:
    """XGBoost's collective for this rank, where the job has more than one (else nothing)."""
    tracker = dict(ctx.task.rendezvous.xgboost_tracker)
    if not tracker:
        return contextlib.nullcontext()
    timeout = math.ceil(ctx.task.rendezvous.collective_timeout_seconds)
    return _Communicator(dmlc_task_id=f"{ctx.rank:06d}", dmlc_timeout=timeout, **tracker)


class _Communicator(collective.CommunicatorContext):
    """XGBoost's communicator, whose end does not hide why training ended early.

    A worker whose peer was lost (killed, its machine gone) fails in a collective with a
    broken connection, a fault a retry mends. Leaving the communicator then finalizes it, and
    that can fail too (shutting down waits on the lost peer and reports to the tracker, which
    may have gone): raised from `__exit__`, its error ("Failed to shutdown.") would replace the
    training error, and the job would fail as if the program were at fault. So the training
    error goes on; finalize's is only logged."""

    def __exit__(self, *exc_info: Any) -> None:
        try:
            super().__exit__(*exc_info)
        except xgb.core.XGBoostError as error:
            if exc_info[0] is None:  # training ended well: this is the error
                raise
            print(
                f"scaletune: finalizing XGBoost's communicator failed too: {error}",
                file=sys.stderr,
                flush=True,
            )


class Agreement:
    """Whether to stop, and whether a checkpoint is due, after a round: the same answer on
    every rank, or the next collective would hang. Agreeing is a collective every rank waits
    in (on a busy machine the wait, not the tiny sum, is its cost), so the ranks agree about
    every `AGREE_EVERY_SECONDS` of training rather than every round: rank 0 times its rounds,
    and the rounds to the next agreement travel in this one (the other ranks add nothing).
    With sampled trees the ranks also agree on each sampling period's round, where a
    checkpoint can be taken. A stop requested lands at the next agreement; a checkpoint due
    by count needs none (every rank counts the same). They agree, too, at every step the
    tuner judges (WorkerTask.judged_steps), where rank 0 waited for its verdict: a stop
    decided there lands there."""

    def __init__(
        self,
        ctx: WorkerContext,
        start: int,
        period: int,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        self._ctx = ctx
        self._period = period
        self._clock = clock
        self._next = start + 1  # the first round's end
        self._last = (start, clock())
        # The stop agreed is one the job goes on from (WorkerContext.stop_goes_on), on every
        # rank alike: one rank may learn of a stop's kind later than another.
        self.goes_on = False
        self._judged = sorted(ctx.task.judged_steps)

    def after(self, step: int) -> tuple[bool, bool]:
        ctx, checkpoints = self._ctx, self._ctx.checkpoints
        by_count = checkpoints is not None and checkpoints.step_due(step)
        if step < self._next:
            return False, by_count
        by_time = checkpoints is not None and checkpoints.time_due()
        stop = ctx.stop_requested()
        wanted = np.array(
            [int(stop), int(by_time), self._rounds_to_next(step), int(stop and ctx.stop_goes_on())],
            dtype=np.int64,
        )
        if ctx.world_size > 1:
            wanted = collective.allreduce(wanted, collective.Op.MAX)
        self.goes_on = bool(wanted[3])
        self._next = step + int(wanted[2])
        if self._period > 1:  # and on every sampling period's round, where checkpoints fall
            self._next = min(self._next, (step // self._period + 1) * self._period)
        later = bisect.bisect_right(self._judged, step)
        if later < len(self._judged):
            self._next = min(self._next, self._judged[later])
        return bool(wanted[0]), bool(wanted[1]) or by_count

    def _rounds_to_next(self, step: int) -> int:
        """Rank 0's choice, from its rounds since the last agreement (0 from the others)."""
        if not self._ctx.is_chief:
            return 0
        if self._ctx.world_size == 1:
            return 1  # no collective to wait in: every round
        now = self._clock()
        (last_step, last_time), self._last = self._last, (step, now)
        per_round = (now - last_time) / max(step - last_step, 1)
        fits = int(AGREE_EVERY_SECONDS / per_round) if per_round > 0 else MOST_ROUNDS_APART
        return min(max(fits, 1), MOST_ROUNDS_APART)
