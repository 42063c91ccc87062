"""Downloads for users who are online; every file is checked against a known sha256."""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import urllib.request
import zipfile
from pathlib import Path

from scaletune.errors import InvalidInputError


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def fetch_zip_member(url: str, member: str, sha256: str, destination: Path) -> Path:
    """Download `url` (a zip), extract `member` to `destination` if its sha256 matches."""
    if destination.exists() and sha256_of(destination) == sha256:
        return destination
    destination.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="scaletune-download-") as scratch:
        archive = Path(scratch) / "archive.zip"
        try:
            with urllib.request.urlopen(url, timeout=60) as response, archive.open("wb") as out:
                shutil.copyfileobj(response, out)
        except OSError as exc:
            raise InvalidInputError(f"could not download {url!r}: {exc}") from None
        try:
            with zipfile.ZipFile(archive) as bundle:
                extracted = Path(bundle.extract(member, scratch))
        except (zipfile.BadZipFile, KeyError) as exc:
            raise InvalidInputError(f"{url!r} is not a zip holding {member!r}: {exc}") from None
        actual = sha256_of(extracted)
        if actual != sha256:
            raise InvalidInputError(
                f"{member!r} from {url!r} has sha256 {actual}, expected {sha256}"
            )
        staged = destination.with_suffix(".partial")
        shutil.move(extracted, staged)
        staged.replace(destination)
    return destination
