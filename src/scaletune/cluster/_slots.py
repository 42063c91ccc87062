"""How many workers this machine may run at once: unbounded unless the user says, a number,
or a file whose number may change while jobs run (capacity that comes and goes, as spot
machines do, for elastic jobs and for tests of them)."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from scaletune.errors import InvalidInputError

SLOTS_VARIABLE = "SCALETUNE_LOCAL_SLOTS"


class Slots(Protocol):
    def total(self) -> int | None:
        """The most workers that may run at once now; None: no bound."""
        ...


@dataclass(frozen=True)
class Unbounded:
    def total(self) -> int | None:
        return None


@dataclass(frozen=True)
class FixedSlots:
    count: int

    def total(self) -> int | None:
        return self.count


@dataclass
class SlotsFile:
    """A number in a file, read at each ask: write it anew (to a temporary file, then
    rename) to change the capacity. A file missing or half-written keeps the last number."""

    path: Path
    _last: int | None = field(default=None, repr=False)

    def write(self, count: int) -> None:
        """Set the capacity: written aside, then renamed into place, never seen half-written."""
        partial = self.path.with_name(f".{self.path.name}.partial")
        partial.write_text(str(count), encoding="utf-8")
        partial.replace(self.path)

    def total(self) -> int | None:
        with contextlib.suppress(OSError, InvalidInputError):
            self._last = _count(self.path.read_text(encoding="utf-8").strip(), str(self.path))
        return self._last


def slots_from(environ: Mapping[str, str] = os.environ) -> Slots:
    """SCALETUNE_LOCAL_SLOTS: a number of workers, or the path of a file holding one."""
    value = environ.get(SLOTS_VARIABLE, "").strip()
    if not value:
        return Unbounded()
    if value.isdigit():
        return FixedSlots(_count(value, SLOTS_VARIABLE))
    path = Path(value)
    if not path.is_file():
        raise InvalidInputError(
            f"{SLOTS_VARIABLE}={value!r}: give a number of workers, or a file holding one"
        )
    slots = SlotsFile(path)
    if slots.total() is None:
        raise InvalidInputError(
            f"{SLOTS_VARIABLE}={value!r}: the file does not hold a whole number of workers"
        )
    return slots


def _count(text: str, where: str) -> int:
    if not text.isdigit():
        raise InvalidInputError(f"{where}: {text!r} is not a whole number of workers")
    return int(text)
