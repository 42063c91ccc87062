"""Checks every backend makes before it places a task."""

from __future__ import annotations

from collections.abc import Sequence

from scaletune.errors import InvalidInputError
from scaletune.worker import WorkerTask


def check_importable(tasks: Sequence[WorkerTask]) -> None:
    """Workers import programs by module name: one defined in __main__ cannot be found there."""
    for task in tasks:
        if getattr(task.program, "__module__", None) == "__main__":
            raise InvalidInputError(
                f"worker program {task.program.__qualname__!r} is defined in __main__; "
                "workers import programs by module name, so define it in a module"
            )
