"""What every command shares: the consoles and the --store option."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console

from scaletune.cli._stdout import claim_stdout_for_json

if TYPE_CHECKING:
    from scaletune.cluster import Backend
    from scaletune.spec import BackendName
    from scaletune.store import Store

err = Console(stderr=True)
out = Console()

StoreOption = Annotated[
    str | None,
    typer.Option(
        "--store",
        envvar="SCALETUNE_STORE",
        help="SQLite file or database URL (default: ~/.local/share/scaletune).",
    ),
]
JsonOption = Annotated[
    bool,
    typer.Option(
        "--json", help="Print the record as JSON (alone on stdout).", callback=claim_stdout_for_json
    ),
]
JsonListOption = Annotated[
    bool,
    typer.Option("--json", help="Print JSON (alone on stdout).", callback=claim_stdout_for_json),
]
BackendOption = Annotated[
    str | None,
    typer.Option(
        "--backend",
        help="Where workers run: 'local' (processes here) or 'ray' (actors on a Ray cluster); "
        "default: the job file's cluster.backend.",
    ),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        envvar="RAY_ADDRESS",
        help="A Ray cluster to join ('auto', 'HOST:6379', 'ray://HOST:10001'); without it "
        "the ray backend starts a local Ray instance for the run and stops it after.",
    ),
]


def open_store(store: str | None, *, controller: bool = False) -> Store:
    """The store alone, for commands that only read or flag records: no backend, no
    training stack (`with open_store(store) as records: ...`). Such a command waits 5 s for
    a store that stops answering; a `controller` (a replay writing a tuning job) waits as
    long as a training or tuning controller does."""
    from scaletune.store import COMMAND_PATIENCE, CONTROLLER_PATIENCE, Store, resolve_store

    return Store(resolve_store(store).url, CONTROLLER_PATIENCE if controller else COMMAND_PATIENCE)


def open_backend(
    name: BackendName, ray_address: str | None, cpus_needed: float, **options: Any
) -> Backend:
    """The backend a run asks for; how a Ray instance started here was sized, if notable,
    goes on stderr once (`--json`'s stdout stays one object)."""
    from scaletune.cluster import make_backend

    backend = make_backend(name, ray_address, cpus_needed, **options)
    notice = getattr(backend, "notice", None)
    if notice:
        err.print(notice, highlight=False, soft_wrap=True)
    return backend
