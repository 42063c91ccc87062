"""One controller runs a tuning job at a time: it takes the job's lease in the store before
it starts or resumes it, renews it as it runs, and writes its ending only while it still
holds it. A second controller (a `tuning resume` racing another, or run on another machine,
whose processes this one cannot see) is refused while the lease lives; a lease not renewed
for `LEASE_SECONDS` (its controller killed, frozen or cut off) may be taken over."""

from __future__ import annotations

import os
import socket
import uuid
from dataclasses import dataclass, field

from scaletune.clock import Clock
from scaletune.errors import InvalidInputError
from scaletune.store import Store

LEASE_SECONDS = 60.0
RENEW_SECONDS = 15.0  # renewed this often: three renewals can fail before it lapses


def new_holder() -> str:
    """Who holds a lease: this process, and which of its runs."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


@dataclass
class TuningLease:
    store: Store
    tuning_id: str
    clock: Clock
    holder: str = field(default_factory=new_holder)
    expires: float = 0.0  # on the clock's wall time
    lost: bool = False

    def take(self, from_dead: str | None = None) -> None:
        """Take the lease, or refuse (InvalidInputError) naming the controller holding it;
        taken already, it is kept. `from_dead`: the holder of a controller seen to have died
        (on this machine), whose lease need not lapse first."""
        if self.expires:
            return
        now = self.clock.time()
        taken = self.store.take_tuning_lease(
            self.tuning_id, self.holder, now, now + LEASE_SECONDS, from_dead=from_dead
        )
        if taken is not None:
            raise InvalidInputError(
                f"tuning job {self.tuning_id!r} is run by another controller "
                f"({taken.lease_holder}, its lease renewed until "
                f"{(taken.lease_expires or now) - now:.0f} s from now)"
            )
        self.expires = now + LEASE_SECONDS

    def keep(self) -> bool:
        """Renew the lease when due; False once another controller has taken it."""
        if self.lost:
            return False
        now = self.clock.time()
        if now < self.expires - LEASE_SECONDS + RENEW_SECONDS:
            return True
        if self.store.renew_tuning_lease(self.tuning_id, self.holder, now + LEASE_SECONDS):
            self.expires = now + LEASE_SECONDS
            return True
        self.lost = True
        return False
