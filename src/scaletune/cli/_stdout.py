"""`--json`'s promise: stdout holds exactly one JSON object.

Whatever else writes to stdout while the command runs goes to stderr instead: Python code
that prints (a library, a user's script run in this process), libraries writing to file
descriptor 1 from C (XGBoost's tracker, TensorFlow), Ray's driver threads (which print
messages that the cluster pushes to the driver, "(raylet) ...", to stdout whatever
`log_to_driver` says), and every process started meanwhile, which inherits descriptor 1.
The JSON goes to a duplicate of the original descriptor.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

import typer

_json_stream: TextIO | None = None  # where print_json writes while stdout is diverted


def print_json(value: Any) -> None:
    stream = _json_stream or sys.stdout
    stream.write(json.dumps(value, indent=2, allow_nan=False) + "\n")
    stream.flush()


def divert_stdout() -> Callable[[], None]:
    """Send stdout, at the descriptor where it has one, to stderr; print_json keeps the
    original. Returns what undoes it."""
    global _json_stream
    original = sys.stdout
    original.flush()
    descriptor: int | None = None
    with contextlib.suppress(AttributeError, OSError, ValueError, io.UnsupportedOperation):
        descriptor = original.fileno()  # none where stdout is captured in memory (tests)
    saved: int | None = None
    if descriptor is not None:
        saved = os.dup(descriptor)
        os.dup2(sys.stderr.fileno(), descriptor)
        stream: TextIO = os.fdopen(os.dup(saved), "w", encoding=original.encoding or "utf-8")
    else:
        stream = original
    sys.stdout = sys.stderr
    _json_stream = stream

    def restore() -> None:
        global _json_stream
        stream.flush()
        if descriptor is not None and saved is not None:
            sys.stderr.flush()
            os.dup2(saved, descriptor)
            os.close(saved)
            stream.close()
        sys.stdout = original
        _json_stream = None

    return restore


def claim_stdout_for_json(ctx: typer.Context, value: bool) -> bool:
    """The --json option's callback: from the moment the option is parsed until the command
    ends, stdout is print_json's alone."""
    if value and _json_stream is None:
        ctx.call_on_close(divert_stdout())
    return value
