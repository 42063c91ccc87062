"""Which backend a run gets: the local one, or Ray's (imported only when asked for)."""

from __future__ import annotations

from typing import Any

from scaletune.cluster._backend import Backend
from scaletune.errors import InvalidInputError
from scaletune.spec import BackendName


def make_backend(
    name: BackendName, ray_address: str | None = None, cpus_needed: float = 0.0, **options: Any
) -> Backend:
    """The backend a job or tuning job asks for; Ray's is imported only when asked for.
    `cpus_needed`: the most CPUs of workers a run asks at once, to size a Ray instance
    started here (a joined cluster is what it is)."""
    if name is BackendName.RAY:
        from scaletune.cluster._ray import RayBackend

        return RayBackend(address=ray_address, cpus_needed=cpus_needed, **options)
    if ray_address is not None:
        raise InvalidInputError(
            f"--ray-address {ray_address!r} goes with the ray backend, not {name.value!r}"
        )
    from scaletune.cluster._local import LocalBackend  # on demand, as Ray's: light commands

    return LocalBackend(**options)
