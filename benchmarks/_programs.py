"""Worker programs for benchmarks (importable by module name, as workers need)."""

from __future__ import annotations

from pydantic import BaseModel

from scaletune.worker import WorkerContext


def do_nothing(ctx: WorkerContext) -> None:
    """The empty program: measures placement and hand-off only."""


class NoHyperparameters(BaseModel):
    pass
