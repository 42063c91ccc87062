"""IDX files (the MNIST format): a big-endian header, then a dense uint8 array."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path

import numpy as np
import numpy.typing as npt

from scaletune.errors import InvalidInputError

# The third header byte is the element type, the fourth the number of dimensions.
_UBYTE = 0x08
LABELS_MAGIC = 2049  # 0x00000801: uint8, one dimension
IMAGES_MAGIC = 2051  # 0x00000803: uint8, three dimensions


def read_idx(path: Path, expected_magic: int) -> npt.NDArray[np.uint8]:
    """Read an IDX file (gzipped or not), checking its magic number and size."""
    try:
        raw = _read_bytes(path)
    except OSError as exc:
        raise InvalidInputError(f"cannot read IDX file {str(path)!r}: {exc}") from None
    if len(raw) < 4:
        raise InvalidInputError(f"IDX file {str(path)!r} is too short for a header")
    (magic,) = struct.unpack(">I", raw[:4])
    if magic != expected_magic:
        raise InvalidInputError(
            f"IDX file {str(path)!r} has magic number {magic}, expected {expected_magic}"
        )
    if raw[2] != _UBYTE:  # pragma: no cover - the magic check above already pins the type
        raise InvalidInputError(f"IDX file {str(path)!r} does not hold unsigned bytes")
    n_dims = raw[3]
    header = 4 + 4 * n_dims
    dims = struct.unpack(f">{n_dims}I", raw[4:header])
    expected = int(np.prod(dims))
    if len(raw) - header != expected:
        shape = "x".join(str(dim) for dim in dims)
        raise InvalidInputError(
            f"IDX file {str(path)!r} declares {shape} values but holds {len(raw) - header}"
        )
    return np.frombuffer(raw, dtype=np.uint8, offset=header).reshape(dims)


def _read_bytes(path: Path) -> bytes:
    with path.open("rb") as handle:
        gzipped = handle.read(2) == b"\x1f\x8b"
    if gzipped:
        try:
            with gzip.open(path, "rb") as handle:
                return handle.read()
        except (gzip.BadGzipFile, EOFError) as exc:
            raise InvalidInputError(f"IDX file {str(path)!r} is a broken gzip: {exc}") from None
    return path.read_bytes()
