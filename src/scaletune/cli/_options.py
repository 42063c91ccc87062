"""What every command shares: the consoles and the --store option."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

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
JsonOption = Annotated[bool, typer.Option("--json", help="Print the record as JSON.")]
