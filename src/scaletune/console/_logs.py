"""The end of a worker's log: a large file is read from its tail only."""

from __future__ import annotations

from pathlib import Path

TAIL_BYTES = 64 * 1024


def tail(path: Path, limit: int = TAIL_BYTES) -> tuple[str | None, bool]:
    """The last `limit` bytes of the file as text, from a line's start; whether it was cut.
    None when there is no such file (yet)."""
    try:
        with path.open("rb") as file:
            size = file.seek(0, 2)
            cut = size > limit
            file.seek(max(0, size - limit))
            data = file.read(limit)
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None, False
    if cut and b"\n" in data:
        data = data[data.index(b"\n") + 1 :]
    return data.decode("utf-8", errors="replace"), cut
