"""A pydantic validation error as the one line the CLI prints."""

from __future__ import annotations

from pydantic import ValidationError


def describe_validation_error(exc: ValidationError) -> str:
    """Every problem on one line, each naming the key and the value given."""
    problems = []
    for error in exc.errors():
        location = ".".join(str(part) for part in error["loc"])
        if error["type"] == "extra_forbidden":
            problems.append(f"unknown key {location!r}")
        elif error["type"] == "missing":
            problems.append(f"missing key {location!r}")
        else:
            message = error["msg"].removeprefix("Value error, ")
            where = f"{location}: " if location else ""
            shown = error.get("input")
            got = "" if isinstance(shown, dict) else f" (got {shown!r})"
            problems.append(f"{where}{message}{got}")
    return "; ".join(problems)
