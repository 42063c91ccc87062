"""`scaletune.report()` and `scaletune.checkpoint()` for users' scripts: no-ops outside
scaletune, so scripts run alone too.

Inside a job, the worker that launched the script reads its stdout; a report is one line with
a prefix and JSON, which the worker turns into a metric report (rank 0's count). A checkpoint
is saved by the script's own process (so the files cannot change while they are read), then
announced the same way."""

from __future__ import annotations

import functools
import json
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from scaletune._verdict import await_verdict, read_step

REPORT_ENV = "SCALETUNE_REPORT"
REPORT_PREFIX = "@@scaletune-report "
CHECKPOINT_PREFIX = "@@scaletune-checkpoint "
CHECKPOINT_DIR_ENV = "SCALETUNE_CHECKPOINT_DIR"  # this worker's folder: restored, then saved
CHECKPOINT_ROOT_ENV = "SCALETUNE_CHECKPOINT_ROOT"  # where the job's checkpoints go (path/URL)
CHECKPOINT_KEEP_ENV = "SCALETUNE_CHECKPOINT_KEEP"
CHECKPOINT_SAVES_ENV = "SCALETUNE_CHECKPOINT_SAVES"  # "1" on the rank that saves (rank 0)
CHECKPOINT_STEP_ENV = "SCALETUNE_CHECKPOINT_STEP"  # the step restored, when resuming
# Seconds a collective should wait on a peer: past it, the attempt is retried as hung.
COLLECTIVE_TIMEOUT_ENV = "SCALETUNE_COLLECTIVE_TIMEOUT_SECONDS"
# A file that appears, before the SIGTERM that asks the script to end, when the job goes on
# from the checkpoint the script saves as it stops (a preemption notice, a resize, a pause).
STOP_GOES_ON_ENV = "SCALETUNE_STOP_GOES_ON_FILE"
# The reporting rank's steps whose report waits for the tuner's verdict (a trial's rungs),
# comma-separated, and the file its worker writes the latest step judged to.
JUDGED_STEPS_ENV = "SCALETUNE_JUDGED_STEPS"
JUDGED_FILE_ENV = "SCALETUNE_JUDGED_FILE"

_last_reported: int | None = None
# Set by scaletune's SIGTERM handlers (StopRequest, the Keras callback): a report waiting for
# its verdict stops waiting, the stop being the verdict.
stop_seen = threading.Event()


def report(step: int, **metrics: float) -> None:
    """Record `metrics` at `step` (an epoch, a round) for the running training job."""
    global _last_reported
    if os.environ.get(REPORT_ENV) != "stdout":
        return
    _last_reported = int(step)
    payload = {"step": int(step), "metrics": {name: float(v) for name, v in metrics.items()}}
    sys.stdout.write(REPORT_PREFIX + json.dumps(payload) + "\n")
    sys.stdout.flush()
    if int(step) in _judged_steps(os.environ.get(JUDGED_STEPS_ENV, "")):
        # A rung: the worker writes the step once the tuner judged it, so that a stop it
        # decides lands here however busy the machine.
        judged = Path(os.environ.get(JUDGED_FILE_ENV, ""))
        await_verdict(int(step), stop_seen.is_set, lambda: read_step(judged))


@functools.cache
def _judged_steps(text: str) -> frozenset[int]:
    return frozenset(int(part) for part in text.split(",") if part.strip())


def checkpoint(step: int) -> bool:
    """Save every file in $SCALETUNE_CHECKPOINT_DIR as the job's checkpoint at `step`; a retry
    or `jobs resume` starts the script again with those files back in that folder (and
    $SCALETUNE_CHECKPOINT_STEP set). Call it on every rank: rank 0 saves, the others return
    False at once, as does a failed save (the job goes on) and a run outside scaletune."""
    folder, root = os.environ.get(CHECKPOINT_DIR_ENV), os.environ.get(CHECKPOINT_ROOT_ENV)
    if not folder or not root or os.environ.get(CHECKPOINT_SAVES_ENV) != "1":
        return False
    from scaletune.checkpoints import CheckpointError, CheckpointFolder  # only when saving

    started = time.monotonic()
    files = {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(Path(folder).rglob("*"))
        if path.is_file()
    }
    reported = _last_reported if _last_reported is not None else int(step)
    try:
        saved = CheckpointFolder(root)
        saved.save(int(step), files, {"reported_step": reported}, saved_at=time.time())
        saved.prune(int(os.environ.get(CHECKPOINT_KEEP_ENV, "2")))
    except CheckpointError as exc:
        print(f"scaletune: {exc}", file=sys.stderr, flush=True)
        return False
    seconds = time.monotonic() - started
    sys.stdout.write(CHECKPOINT_PREFIX + json.dumps({"step": int(step), "seconds": seconds}) + "\n")
    sys.stdout.flush()
    return True


def stop_goes_on() -> bool:
    """After scaletune's SIGTERM: whether the job goes on from the checkpoint this script saves
    now (its machine's preemption notice, a resize, a tuner's pause), so save one at the next
    step it can resume from, then exit; otherwise the job ends, so exit. False outside
    scaletune."""
    path = os.environ.get(STOP_GOES_ON_ENV)
    return path is not None and Path(path).exists()


class StopRequest:
    """SIGTERM, which scaletune sends a script to end it, as a flag the training loop reads
    at its next step instead of an end mid-step with nothing saved:

        stop = scaletune.StopRequest()
        for step in ...:
            train_one_step()
            if stop.requested:
                if stop.goes_on:
                    save_and_checkpoint(step)  # scaletune.checkpoint(step)
                break

    A distributed script's ranks get it at different moments: agree first (with PyTorch,
    `scaletune.torch.agreed(stop.requested)`). Made in the main thread (signal handlers are
    set there); `close()` puts the earlier handler back. Outside scaletune it never comes."""

    def __init__(self) -> None:
        self._event = threading.Event()
        self._previous = signal.signal(signal.SIGTERM, self._requested)

    def _requested(self, signum: int, frame: FrameType | None) -> None:
        self._event.set()
        stop_seen.set()

    @property
    def requested(self) -> bool:
        return self._event.is_set()

    @property
    def goes_on(self) -> bool:
        """The job goes on from the checkpoint saved now (see `stop_goes_on`)."""
        return self.requested and stop_goes_on()

    def close(self) -> None:
        signal.signal(signal.SIGTERM, self._previous)
