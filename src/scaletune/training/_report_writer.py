"""A running job's reports go into the store from a thread of their own, in order, so that the
controller never waits on the store while the workers train: when the database stops
answering (a server restart, a dropped connection, a lock held elsewhere), the reports wait
here, in memory up to a bound and past it in a file of the job's, and are written once the
store is back, each once.

If the store stays away longer than its patience, the writer gives up: what it could not
write is left in that file, named in the error, and written first when the job is resumed
(`replay`)."""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from scaletune.store import MetricPoint, RejectedMetric, Store

logger = logging.getLogger("scaletune.training")

# About 100 bytes a point held: some 10 MB before reports go to the file.
MEMORY_POINTS = 100_000
_CHUNK_LINES = 1_000  # read back from the file at a time


@dataclass(frozen=True)
class Points:
    points: tuple[MetricPoint, ...]


@dataclass(frozen=True)
class Rejected:
    items: tuple[RejectedMetric, ...]


@dataclass(frozen=True)
class CheckpointMark:
    """An attempt's checkpoint at `step`, written after every report before it."""

    attempt: int
    step: int


Write = Points | Rejected | CheckpointMark


class ReportWriter:
    def __init__(
        self, store: Store, job_id: str, spill: Path, memory_points: int = MEMORY_POINTS
    ) -> None:
        self._store, self._job_id, self._spill = store, job_id, spill
        self._memory_points = memory_points
        self._changed = threading.Condition()
        self._queue: deque[Write] = deque()
        self._held = 0  # points in the queue
        self._spilling = False  # past the bound: writes go to the file until it is sent
        self._read_offset = 0  # how far the file has been written to the store
        self._in_flight = False
        self._closed = False
        self._error: Exception | None = None  # why the thread stopped writing
        self._thread = threading.Thread(target=self._run, name=f"reports-{job_id}", daemon=True)
        self._thread.start()

    # -- what the controller hands over ---------------------------------------------------

    def metrics(self, points: Sequence[MetricPoint]) -> None:
        if points:
            self._put(Points(tuple(points)))

    def rejected(self, items: Sequence[RejectedMetric]) -> None:
        if items:
            self._put(Rejected(tuple(items)))

    def checkpoint(self, attempt: int, step: int) -> None:
        self._put(CheckpointMark(attempt, step))

    def drain(self) -> None:
        """Wait until everything handed over is in the store; StoreUnavailableError if the
        store stayed away longer than its patience (or the error a write met)."""
        with self._changed:
            while self._error is None and (
                self._queue or self._in_flight or self._unsent_in_file()
            ):
                self._changed.wait()
            if self._error is not None:
                raise self._error

    def close(self) -> None:
        """Stop the thread; what it could not write is left in the file (named in a
        warning), written first when the job is resumed."""
        with self._changed:
            self._closed = True
            self._changed.notify_all()
        self._thread.join()
        left = list(self._queue)
        if not left and not self._unsent_in_file():
            self._spill.unlink(missing_ok=True)
            return
        unsent = left + list(_read(self._spill, self._read_offset))
        _write_file(self._spill, unsent)
        logger.warning(
            "job %s: %d writes the store did not take are kept in %s; they are written "
            "when the job is resumed",
            self._job_id,
            len(unsent),
            self._spill,
        )

    # -- the thread ---------------------------------------------------------------------

    def _put(self, write: Write) -> None:
        with self._changed:
            size = _size(write)
            if self._spilling or self._held + size > self._memory_points:
                if not self._spilling:
                    logger.warning(
                        "job %s: the store is behind by %d points; further reports wait in %s",
                        self._job_id,
                        self._held,
                        self._spill,
                    )
                self._spilling = True
                _append(self._spill, [write])
            else:
                self._queue.append(write)
                self._held += size
            self._changed.notify_all()

    def _run(self) -> None:
        while True:
            with self._changed:
                while not (self._queue or self._unsent_in_file() or self._closed):
                    self._changed.wait()
                if self._queue:
                    batch, offset = list(self._queue), None
                elif self._unsent_in_file():
                    batch, offset = _read_chunk(self._spill, self._read_offset)
                else:
                    return  # closed, and everything was written
                self._in_flight = True
            try:
                write_in_order(self._store, self._job_id, batch)
            except Exception as exc:  # the store away too long, or a write it refused
                with self._changed:
                    self._error, self._in_flight = exc, False
                    self._changed.notify_all()
                return
            with self._changed:
                self._in_flight = False
                if offset is None:
                    for _ in batch:
                        self._held -= _size(self._queue.popleft())
                else:
                    self._read_offset = offset
                    if offset >= self._spill.stat().st_size:  # all sent: memory again
                        self._spill.unlink()
                        self._read_offset, self._spilling = 0, False
                self._changed.notify_all()

    def _unsent_in_file(self) -> bool:
        return (
            self._spilling
            and self._spill.exists()
            and (self._spill.stat().st_size > self._read_offset)
        )


def write_in_order(store: Store, job_id: str, writes: Sequence[Write]) -> None:
    """Runs of reports as one transaction each, then what follows them."""
    points: list[MetricPoint] = []
    for write in writes:
        if isinstance(write, Points):
            points.extend(write.points)
            continue
        store.append_metrics(job_id, points)
        points = []
        if isinstance(write, Rejected):
            store.append_rejected(job_id, write.items)
        else:
            store.attempts.set_checkpoint(job_id, write.attempt, write.step)
    store.append_metrics(job_id, points)


def replay(store: Store, job_id: str, spill: Path) -> int:
    """Write what an earlier run left unsent (`ReportWriter.close`), then forget it; how many
    writes there were."""
    if not spill.exists():
        return 0
    writes = list(_read(spill, 0))
    write_in_order(store, job_id, writes)
    spill.unlink()
    return len(writes)


def _size(write: Write) -> int:
    if isinstance(write, Points):
        return len(write.points)
    if isinstance(write, Rejected):
        return len(write.items)
    return 1


def _encode(write: Write) -> str:
    if isinstance(write, Points):
        return json.dumps({"points": [dataclasses.astuple(p) for p in write.points]})
    if isinstance(write, Rejected):
        return json.dumps({"rejected": [dataclasses.astuple(r) for r in write.items]})
    return json.dumps({"checkpoint": [write.attempt, write.step]})


def _decode(line: str) -> Write:
    raw = json.loads(line)
    if "points" in raw:
        return Points(tuple(MetricPoint(*p) for p in raw["points"]))
    if "rejected" in raw:
        return Rejected(tuple(RejectedMetric(*r) for r in raw["rejected"]))
    attempt, step = raw["checkpoint"]
    return CheckpointMark(attempt, step)


def _append(path: Path, writes: Iterable[Write]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", encoding="utf-8") as file:
        file.writelines(_encode(write) + "\n" for write in writes)


def _write_file(path: Path, writes: Sequence[Write]) -> None:
    partial = path.with_name(f".{path.name}.partial")
    partial.unlink(missing_ok=True)
    _append(partial, writes)
    partial.replace(path)


def _read(path: Path, offset: int) -> Iterator[Write]:
    if not path.exists():
        return
    with path.open("rb") as file:
        file.seek(offset)
        for line in file:
            yield _decode(line.decode("utf-8"))


def _read_chunk(path: Path, offset: int) -> tuple[list[Write], int]:
    """Up to `_CHUNK_LINES` writes from `offset`, and where the next chunk starts."""
    writes: list[Write] = []
    with path.open("rb") as file:
        file.seek(offset)
        for line in file:
            writes.append(_decode(line.decode("utf-8")))
            offset += len(line)
            if len(writes) >= _CHUNK_LINES:
                break
    return writes, offset
