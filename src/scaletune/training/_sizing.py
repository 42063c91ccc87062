"""How many workers a job trains at: a fixed job's count; an elastic job's as asked, as far
as the capacity allows; and, between its steps, whether it should grow or shrink."""

from __future__ import annotations

from scaletune.cluster import Backend
from scaletune.errors import StoreUnavailableError
from scaletune.spec import CapacityPlan
from scaletune.store import Store
from scaletune.training._ending import ResizeCheck, Resizing
from scaletune.training._prepared import PreparedJob


class Sizing:
    def __init__(self, store: Store, backend: Backend) -> None:
        self._store, self._backend = store, backend

    def placeable(self, job: PreparedJob, held: int = 0, store: Store | None = None) -> int:
        """The size to train at: a fixed job's; an elastic job's as asked (`jobs resize`,
        else its most) as far as the capacity free beside its `held` workers allows, never
        below its fewest (placing those waits for room)."""
        spec = job.spec
        if not spec.elastic:
            return spec.instance_count
        asked = (store or self._store).requested_size(job.id) or spec.instance_count
        free = self._backend.capacity(spec.cluster)
        if spec.cluster.capacity is CapacityPlan.MIXED and self._backend.spot_room_apart:
            # Its fewest are on-demand; the capacity counted is spot room, for the rest.
            held = max(held, spec.min_workers)
        fits = asked if free is None else min(asked, held + free)
        return max(fits, spec.min_workers)

    def resize_check(self, job: PreparedJob, size: int) -> ResizeCheck:
        """Asked at each stop check of an elastic job training at `size`: read without
        waiting, so a store that is away asks again at the next check."""
        hurried = self._store.without_waiting()

        def check() -> Resizing | None:
            try:
                wanted = self.placeable(job, held=size, store=hurried)
            except StoreUnavailableError:
                return None
            if wanted == size:
                return None
            if wanted > size:
                return Resizing(wanted, f"resized to {wanted} workers: room for more")
            return Resizing(wanted, f"resized to {wanted} workers: asked for (jobs resize)")

        return check
