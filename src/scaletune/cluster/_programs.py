"""What every backend reads of the tasks before it places them: checks, and the modules their
programs need."""

from __future__ import annotations

from collections.abc import Sequence

from scaletune.errors import InvalidInputError
from scaletune.worker import WorkerProgram, WorkerTask


def check_importable(tasks: Sequence[WorkerTask]) -> None:
    """Workers import programs by module name: one defined in __main__ cannot be found there."""
    for task in tasks:
        if getattr(task.program, "__module__", None) == "__main__":
            raise InvalidInputError(
                f"worker program {task.program.__qualname__!r} is defined in __main__; "
                "workers import programs by module name, so define it in a module"
            )


def with_program_modules(
    preload: tuple[str, ...], programs: Sequence[WorkerProgram]
) -> tuple[str, ...]:
    """`preload` and then the modules that define `programs` (an algorithm's program module
    imports its library: xgboost, torch): what a worker imports before its first task."""
    modules = {getattr(program, "__module__", None) for program in programs}
    return preload + tuple(sorted(m for m in modules if m and m not in preload))
