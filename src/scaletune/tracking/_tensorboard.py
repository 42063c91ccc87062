"""TensorBoard event files: a scalar per reported metric and step, and the job's
hyperparameters through the HParams plugin, so that TensorBoard compares a tuning job's
trials. Written with TensorBoard's record writer and protocol buffers into a plain file:
TensorBoard's `EventFileWriter` opens its file through `tensorboard.compat.tf`, which imports
all of TensorFlow where it is installed (seconds, in the controller)."""

from __future__ import annotations

import itertools
import logging
import os
import socket
import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaletune.store import MetricPoint
from scaletune.tracking._events import JobEnd, TrackedJob, TrackedTuning, TuningEnd

if TYPE_CHECKING:
    from tensorboard.summary.writer.record_writer import RecordWriter

log = logging.getLogger("scaletune.tracking")
EVENT_FILE_PREFIX = "events.out.tfevents."
FLUSH_SECONDS = 1.0
_files = itertools.count()  # two files of one process in one second get distinct names


class EventFile:
    """One event file: TensorBoard's TFRecord framing (its `RecordWriter`) over a plain
    file, flushed as it goes so that TensorBoard shows a running job."""

    def __init__(self, folder: Path) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.summary.writer.record_writer import RecordWriter

        folder.mkdir(parents=True, exist_ok=True)
        now = time.time()
        name = (
            f"{EVENT_FILE_PREFIX}{int(now):010d}.{socket.gethostname()}.{os.getpid()}"
            f".{next(_files)}"
        )
        self._records: RecordWriter = RecordWriter((folder / name).open("wb"))
        self._next_flush = 0.0
        self.write(Event(wall_time=now, file_version="brain.Event:2"))

    def write(self, event: Any) -> None:
        self._records.write(event.SerializeToString())
        now = time.monotonic()
        if now >= self._next_flush:  # a running job shows within a second; not a syscall a report
            self._records.flush()
            self._next_flush = now + FLUSH_SECONDS

    def close(self) -> None:
        self._records.close()


def tensorboard_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("tensorboard") is not None


class TensorBoardJob:
    """One job's event files in `folder` (a resumed job adds a file beside its first)."""

    def __init__(self, folder: Path, job: TrackedJob) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.plugins.hparams import summary_v2

        self._event = Event
        self.folder = folder
        seen = folder.is_dir() and any(folder.glob(f"{EVENT_FILE_PREFIX}*"))
        self._file = EventFile(folder)
        if not seen:
            session = summary_v2.hparams_pb(
                hparam_values(job.hyperparameters),
                trial_id=job.id,
                start_time_secs=job.start_time,
            )
            self._file.write(Event(wall_time=job.start_time, step=0, summary=session))
            self._write_points(job.earlier_metrics)

    def report(self, step: int, metrics: Mapping[str, float], time: float) -> None:
        self._file.write(self._event(wall_time=time, step=step, summary=_scalars(metrics)))

    def finish(self, end: JobEnd) -> None:
        self._file.close()

    def _write_points(self, points: Iterable[MetricPoint]) -> None:
        for point in points:
            self.report(point.step, {point.name: point.value}, point.time)


class TensorBoardTuning:
    """A tuning job's HParams experiment: the tuned ranges and the objective, in the folder
    above its trials' own."""

    def __init__(self, folder: Path, tuning: TrackedTuning) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.plugins.hparams import summary_v2

        if folder.is_dir() and any(folder.glob(f"{EVENT_FILE_PREFIX}*")):
            return  # resumed: its experiment was written when it started
        experiment = summary_v2.hparams_config_pb(
            hparams=[_hparam(name, bounds) for name, bounds in tuning.ranges.items()],
            metrics=[summary_v2.Metric(tuning.objective_metric)],
            time_created_secs=tuning.start_time,
        )
        file = EventFile(folder)
        file.write(Event(wall_time=tuning.start_time, summary=experiment))
        file.close()

    def finish(self, end: TuningEnd) -> None:
        pass  # the trials' own files hold their results


def hparam_values(hyperparameters: Mapping[str, object]) -> dict[str, bool | int | float | str]:
    """What the HParams plugin takes: numbers, text, booleans (a list becomes its text)."""
    values: dict[str, bool | int | float | str] = {}
    for name, value in hyperparameters.items():
        values[name] = value if isinstance(value, bool | int | float | str) else str(value)
    return values


def _scalars(metrics: Mapping[str, float]) -> Any:
    from tensorboard.compat.proto.summary_pb2 import Summary

    return Summary(
        value=[Summary.Value(tag=name, simple_value=value) for name, value in metrics.items()]
    )


def _hparam(name: str, bounds: Mapping[str, object]) -> Any:
    from tensorboard.plugins.hparams import summary_v2

    kind = bounds.get("type")
    low, high = bounds.get("min_value"), bounds.get("max_value")
    if kind == "Integer" and isinstance(low, int) and isinstance(high, int):
        return summary_v2.HParam(name, summary_v2.IntInterval(low, high))
    if kind == "Continuous" and isinstance(low, int | float) and isinstance(high, int | float):
        return summary_v2.HParam(name, summary_v2.RealInterval(float(low), float(high)))
    values = bounds.get("values")
    if isinstance(values, list) and values:
        if len({type(value) for value in values}) > 1:  # Discrete takes one type
            values = [str(value) for value in values]
        return summary_v2.HParam(name, summary_v2.Discrete(values))
    return summary_v2.HParam(name)
