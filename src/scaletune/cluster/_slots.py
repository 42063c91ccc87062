"""How many workers this machine may run at once: unbounded unless the user says, a number,
or a file whose number may change while jobs run (capacity that comes and goes, as spot
machines do, for elastic jobs and for tests of them). Either may name slots by capacity class
("on-demand=2 spot=2"): a spot worker then takes a spot slot, an on-demand one an on-demand
slot, as Ray places spot workers on spot nodes."""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from scaletune.errors import InvalidInputError
from scaletune.spec import CapacityClass
from scaletune.worker import write_whole

SLOTS_VARIABLE = "SCALETUNE_LOCAL_SLOTS"


@dataclass(frozen=True)
class SlotCount:
    """Workers at once: `total`, and for slots named by class, how many of each."""

    total: int
    by_class: Mapping[CapacityClass, int] | None = None

    def of_class(self, capacity: CapacityClass) -> int | None:
        return None if self.by_class is None else self.by_class.get(capacity, 0)

    def __str__(self) -> str:
        if self.by_class is None:
            return str(self.total)
        return " ".join(f"{name.value}={count}" for name, count in self.by_class.items())


class Slots(Protocol):
    def count(self) -> SlotCount | None:
        """The workers that may run at once now; None: no bound."""
        ...


@dataclass(frozen=True)
class Unbounded:
    def count(self) -> SlotCount | None:
        return None


@dataclass(frozen=True)
class FixedSlots:
    total: int
    by_class: Mapping[CapacityClass, int] | None = None

    def count(self) -> SlotCount | None:
        return SlotCount(self.total, self.by_class)


@dataclass
class SlotsFile:
    """Slots in a file, read at each ask: write it anew (to a temporary file, then rename) to
    change the capacity. A file missing or half-written keeps the last count."""

    path: Path
    _last: SlotCount | None = field(default=None, repr=False)

    def write(self, count: int | Mapping[CapacityClass, int]) -> None:
        """Set the capacity: written aside, then renamed into place, never seen half-written."""
        slots = SlotCount(count) if isinstance(count, int) else _by_class(count)
        write_whole(self.path, str(slots))

    def count(self) -> SlotCount | None:
        with contextlib.suppress(OSError, InvalidInputError):
            self._last = parse_slots(self.path.read_text(encoding="utf-8"), str(self.path))
        return self._last


def slots_from(environ: Mapping[str, str] = os.environ) -> Slots:
    """SCALETUNE_LOCAL_SLOTS: a number of workers (or "on-demand=N spot=M"), or the path of a
    file holding one."""
    value = environ.get(SLOTS_VARIABLE, "").strip()
    if not value:
        return Unbounded()
    if value[0].isdigit() or "=" in value:
        fixed = parse_slots(value, SLOTS_VARIABLE)
        return FixedSlots(fixed.total, fixed.by_class)
    path = Path(value)
    if not path.is_file():
        raise InvalidInputError(
            f"{SLOTS_VARIABLE}={value!r}: give a number of workers, or a file holding one"
        )
    slots = SlotsFile(path)
    if slots.count() is None:
        raise InvalidInputError(
            f"{SLOTS_VARIABLE}={value!r}: the file does not hold a whole number of workers"
        )
    return slots


_CLASS_COUNT = re.compile(r"([a-z-]+)=(\d+)")


def parse_slots(text: str, where: str) -> SlotCount:
    """ "4", or slots by class: "on-demand=2 spot=2" (spaces or commas between)."""
    text = text.strip()
    if text.isdigit():
        return SlotCount(int(text))
    parts = [part for part in re.split(r"[\s,]+", text) if part]
    counts: dict[CapacityClass, int] = {}
    for part in parts:
        match = _CLASS_COUNT.fullmatch(part)
        names = ", ".join(repr(c.value) for c in CapacityClass)
        if match is None or match[1] not in {c.value for c in CapacityClass}:
            raise InvalidInputError(
                f"{where}: {text!r} is not a whole number of workers, nor slots by class "
                f"({names}: 'on-demand=2 spot=2')"
            )
        counts[CapacityClass(match[1])] = int(match[2])
    if not counts:
        raise InvalidInputError(f"{where}: {text!r} is not a whole number of workers")
    return _by_class(counts)


def _by_class(counts: Mapping[CapacityClass, int]) -> SlotCount:
    ordered = {name: counts.get(name, 0) for name in CapacityClass}
    return SlotCount(sum(ordered.values()), ordered)
