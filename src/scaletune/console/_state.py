"""What every request handler of the console shares: the open store, the rules of access,
the templates, and the cache of chart data (on `request.app.state.console`)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.templating import Jinja2Templates

from scaletune.console._security import Access
from scaletune.store import Store, TuningJobRecord


class ChartCache:
    """Values computed from a tuning job's trials, kept until the store changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._values: dict[tuple[str, str], tuple[str, Any]] = {}

    def get(self, kind: str, store: Store, record: TuningJobRecord, make: Callable[[], Any]) -> Any:
        # An ended job's trials no longer change; a running one's change with the store.
        mark = (
            f"ended@{record.end_time}"
            if record.status.is_terminal
            else store.browse.change_mark().token()
        )
        with self._lock:
            cached = self._values.get((kind, record.id))
        if cached is not None and cached[0] == mark:
            return cached[1]
        value = make()
        with self._lock:
            self._values[(kind, record.id)] = (mark, value)
        return value


class StreamSlots:
    """How many live pages (event streams) are open, bounded: each holds a connection and
    polls the store, so past the bound a page is told to wait rather than served."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.open = 0
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self.open >= self.limit:
                return False
            self.open += 1
            return True

    def give_back(self) -> None:
        with self._lock:
            self.open -= 1


DEFAULT_MAX_STREAMS = 64


@dataclass
class ConsoleState:
    store: Store
    access: Access
    templates: Jinja2Templates
    poll_seconds: float = 1.0  # how often live pages look for changes in the store
    cache: ChartCache = field(default_factory=ChartCache)
    streams: StreamSlots = field(default_factory=lambda: StreamSlots(DEFAULT_MAX_STREAMS))


def console_state(request: Request) -> ConsoleState:
    state: ConsoleState = request.app.state.console
    return state
