"""Where the store and the job files live: --store / SCALETUNE_STORE / a per-user default."""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from scaletune.errors import StoreError

STORE_ENV = "SCALETUNE_STORE"
HOME_ENV = "SCALETUNE_HOME"
DB_FILE = "scaletune.db"
CONSOLE_FILE = "console.json"  # where a running console over this store says it listens


@dataclass(frozen=True)
class StoreLocation:
    url: str
    home: Path  # job folders (logs, models) live under home/jobs

    @property
    def jobs_dir(self) -> Path:
        return self.home / "jobs"

    @contextlib.contextmanager
    def announce_console(self, url: str) -> Iterator[None]:
        """While the block runs, a console at `url` serves this store: notebooks link to it.
        The file is the user's alone (the URL may carry the console's token)."""
        file = self.home / CONSOLE_FILE
        file.parent.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as out:
            json.dump({"url": url, "pid": os.getpid(), "store": self.url}, out)
        try:
            yield
        finally:
            if _announced(file) == (url, os.getpid(), self.url):  # not a later console's
                file.unlink(missing_ok=True)

    def console_url(self) -> str | None:
        """The URL of a running console over this store, if one announced itself."""
        announced = _announced(self.home / CONSOLE_FILE)
        if announced is None:
            return None
        url, pid, store = announced
        return url if store == self.url and _alive(pid) else None


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


def _announced(file: Path) -> tuple[str, int, str] | None:
    try:
        entry = json.loads(file.read_text())
        return str(entry["url"]), int(entry["pid"]), str(entry["store"])
    except (OSError, ValueError, KeyError, TypeError):  # none, or not one of ours
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: not this user's console
        return False
    return True
