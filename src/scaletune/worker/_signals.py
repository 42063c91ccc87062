"""How the controller's word reaches a running task: a stop asked, a report judged.

Local workers read files the controller writes whole (a rename) in the job's scratch folder:
a file, not a signal, since a signal interrupts the collective's socket calls (EINTR). Ray's
workers, on any node, are told through their actor (`cluster._ray`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from scaletune import _verdict
from scaletune._verdict import read_step, read_text

# A stop file's text (and Ray's stop flag) when the job goes on from the checkpoint its
# workers save as they stop (a resize, a preemption notice, a tuner's pause).
GOES_ON = "goes on"
# Beside the stop file: the latest step whose report the controller judged, as text.
JUDGED_FILE = "judged"


class ControllerSignals(Protocol):
    def stop(self) -> str | None:
        """None while no stop is asked; else its kind ("" to end, GOES_ON)."""
        ...

    def judged(self) -> int | None:
        """The latest step whose report the controller has judged; None before any."""
        ...


@dataclass(frozen=True)
class FileSignals:
    """The stop file and the judged file beside it; none of either without a stop file."""

    stop_file: Path | None

    def stop(self) -> str | None:
        return None if self.stop_file is None else read_text(self.stop_file)

    def judged(self) -> int | None:
        return None if self.stop_file is None else read_step(self.stop_file.with_name(JUDGED_FILE))


def write_whole(path: Path, text: str) -> None:
    """Write `path` so that a reader never sees it half-written."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text, encoding="utf-8")
    partial.replace(path)


def await_verdict(signals: ControllerSignals, step: int) -> None:
    """Wait until the controller has judged the report of `step` or asked a stop."""
    _verdict.await_verdict(step, lambda: signals.stop() is not None, signals.judged)
