"""Keras callbacks for training scripts that scaletune runs: each epoch's logs reported as
metrics, a stop (Hyperband's verdict, `jobs stop`) ending `fit` at the next batch, and
checkpoints the job resumes from. Outside scaletune the callback does nothing.

    from scaletune.keras import ReportCallback, restore
    callback = ReportCallback(checkpoint_every=1)
    model.fit(data, epochs=10, initial_epoch=restore(model), callbacks=[callback])

Keras 3 does not run TensorFlow's multi-worker strategies (keras-team/keras#20585); scripts
that use them import `tf_keras` (Keras 2), and the callback is built on whichever Keras the
script imported, `tf_keras` first."""

from __future__ import annotations

import functools
import importlib
import os
import signal
import sys
from pathlib import Path
from types import FrameType
from typing import Any

from scaletune.reporting import (
    CHECKPOINT_DIR_ENV,
    CHECKPOINT_STEP_ENV,
    checkpoint,
    report,
    stop_goes_on,
    stop_seen,
)

WEIGHTS_FILE = "keras.weights.h5"  # in the checkpoint folder; Keras 3 wants this suffix
VALIDATION_PREFIX = "val_"


def metric_names(logs: dict[str, Any]) -> dict[str, float]:
    """Keras' log names as scaletune's: `val_accuracy` is `validation:accuracy`, the rest
    are `train:` (`loss` is `train:loss`)."""
    named = {}
    for name, value in logs.items():
        if name.startswith(VALIDATION_PREFIX):
            named[f"validation:{name[len(VALIDATION_PREFIX) :]}"] = float(value)
        else:
            named[f"train:{name}"] = float(value)
    return named


def restore(model: Any) -> int:
    """Load the weights a retry or `jobs resume` restored, if any; the epoch to start from
    (`fit(initial_epoch=...)`), 0 for a fresh start."""
    folder, step = os.environ.get(CHECKPOINT_DIR_ENV), os.environ.get(CHECKPOINT_STEP_ENV)
    if not folder or not step or not (Path(folder) / WEIGHTS_FILE).is_file():
        return 0
    model.load_weights(str(Path(folder) / WEIGHTS_FILE))
    return int(step)


def _keras() -> Any:
    """The Keras the script uses: tf_keras where it was imported (or TF asks for it)."""
    legacy = "tf_keras" in sys.modules or os.environ.get("TF_USE_LEGACY_KERAS") == "1"
    return importlib.import_module("tf_keras" if legacy else "keras")


def _callback_type() -> type:
    return _callback_on(_keras().callbacks.Callback)


@functools.cache
def _callback_on(base: type) -> type:  # one class for each Keras

    class ReportCallback(base):  # type: ignore[misc]
        """Report each epoch's logs (step = epochs done); end `fit` cleanly on a stop;
        with `checkpoint_every`, save the weights as the job's checkpoint that often. A stop
        the job goes on from (its machine's preemption notice, a resize, a pause) finishes
        the epoch and saves a checkpoint of it first, so no epoch is done twice."""

        def __init__(self, checkpoint_every: int | None = None) -> None:
            super().__init__()
            self.checkpoint_every = checkpoint_every
            self._previous: Any = None
            self._save_and_stop = False  # at the epoch's end

        def on_train_begin(self, logs: dict[str, Any] | None = None) -> None:
            # A stop is SIGTERM to the script: finish the batch and leave fit, not die in it.
            self._previous = signal.signal(signal.SIGTERM, self._stop)

        def on_train_end(self, logs: dict[str, Any] | None = None) -> None:
            if self._previous is not None:
                signal.signal(signal.SIGTERM, self._previous)

        def on_epoch_end(self, epoch: int, logs: dict[str, Any] | None = None) -> None:
            step = epoch + 1
            report(step, **metric_names(logs or {}))
            every = self.checkpoint_every
            folder = os.environ.get(CHECKPOINT_DIR_ENV)
            due = bool(every) and step % (every or 1) == 0
            if folder and (due or self._save_and_stop):
                self.model.save_weights(str(Path(folder) / WEIGHTS_FILE))
                checkpoint(step)
            if self._save_and_stop:
                self.model.stop_training = True

        def _stop(self, signum: int, frame: FrameType | None) -> None:
            stop_seen.set()  # a report waiting for its verdict has it
            if stop_goes_on():
                self._save_and_stop = True
            else:
                self.model.stop_training = True

    return ReportCallback


def __getattr__(name: str) -> Any:
    if name == "ReportCallback":  # built when asked for, on the Keras the script imported
        return _callback_type()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["ReportCallback", "metric_names", "restore"]  # noqa: F822  # the first by __getattr__
