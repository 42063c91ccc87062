"""Where the store and the job files live: --store / SCALETUNE_STORE / a per-user default."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from scaletune.errors import StoreError

STORE_ENV = "SCALETUNE_STORE"
HOME_ENV = "SCALETUNE_HOME"
DB_FILE = "scaletune.db"


@dataclass(frozen=True)
class StoreLocation:
    url: str
    home: Path  # job folders (logs, models) live under home/jobs

    @property
    def jobs_dir(self) -> Path:
        return self.home / "jobs"


def default_home() -> Path:
    if os.environ.get(HOME_ENV):
        return Path(os.environ[HOME_ENV]).expanduser()
    data = Path(os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return data / "scaletune"


def resolve_store(store: str | Path | None = None) -> StoreLocation:
    """A database URL, or a path to an SQLite file whose folder also holds the job files."""
    given = str(store) if store is not None else os.environ.get(STORE_ENV) or None
    if given is None:
        home = default_home()
        return StoreLocation(_sqlite_url(home / DB_FILE), home)
    if "://" in given:
        if given.startswith("sqlite:///"):
            file = Path(given.removeprefix("sqlite:///")).expanduser()
            return StoreLocation(_sqlite_url(file), file.resolve().parent)
        return StoreLocation(given, default_home())
    path = Path(given).expanduser()
    file = path / DB_FILE if path.is_dir() else path
    return StoreLocation(_sqlite_url(file), file.resolve().parent)


def _sqlite_url(file: Path) -> str:
    file = file.resolve()
    try:
        file.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StoreError(
            f"cannot create the store folder {str(file.parent)!r}: {exc.strerror}"
        ) from None
    return f"sqlite:///{file}"
