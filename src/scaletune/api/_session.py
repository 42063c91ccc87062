"""A session ties a store, a backend (with its warm pool) and a clock together."""

from __future__ import annotations

from pathlib import Path

from scaletune.clock import Clock, SystemClock
from scaletune.cluster import Backend, LocalBackend
from scaletune.store import Store, StoreLocation, resolve_store
from scaletune.training import TrainingController


class Session:
    """Open one per program (or use `with`); jobs run through it reuse its warm workers."""

    def __init__(
        self,
        store: str | Path | None = None,
        *,
        backend: Backend | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.location: StoreLocation = resolve_store(store)
        self.store = Store(self.location.url)
        self._owns_backend = backend is None
        self.backend: Backend = backend or LocalBackend()
        self.clock = clock or SystemClock()
        self.controller = TrainingController(
            self.store, self.backend, self.location.jobs_dir, clock=self.clock
        )

    def close(self) -> None:
        self.controller.close()
        if self._owns_backend:
            self.backend.close()
        self.store.close()

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
