"""Files at URLs (s3://, gs://, file://, ...) through fsspec, with errors that name the URL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import fsspec
from fsspec import AbstractFileSystem

from scaletune.errors import InvalidInputError


def filesystem(url: str) -> tuple[AbstractFileSystem, str]:
    """The filesystem that serves `url`, and the path within it."""
    try:
        fs, path = fsspec.core.url_to_fs(url)
    except ImportError as exc:  # fsspec says which package the protocol needs
        raise InvalidInputError(f"{url!r} cannot be opened: {exc}") from None
    except ValueError as exc:
        raise InvalidInputError(f"{url!r} cannot be opened: {exc}") from None
    return fs, str(path)


@contextmanager
def reading(url: str) -> Iterator[None]:
    """Turn whatever a remote filesystem raises (missing key, credentials, network) into one
    line that names the URL."""
    try:
        yield
    except InvalidInputError:
        raise
    except FileNotFoundError:
        raise InvalidInputError(f"{url!r} does not exist") from None
    except Exception as exc:  # botocore and friends raise their own types
        raise InvalidInputError(f"{url!r} cannot be read: {type(exc).__name__}: {exc}") from None


def put_folder(local: Path, url: str) -> None:
    """Copy every file under `local` to the same relative keys under `url`."""
    with reading(url):
        fs, root = filesystem(url)
        for file in sorted(local.rglob("*")):
            if file.is_file():
                fs.put_file(str(file), join_url(root, file.relative_to(local).as_posix()))


def get_folder(url: str, local: Path) -> None:
    """Copy every file under `url` into `local`, keeping their relative keys."""
    with reading(url):
        fs, root = filesystem(url)
        prefix = root.rstrip("/") + "/"
        for key in fs.find(root):
            target = local / key.removeprefix(prefix)
            target.parent.mkdir(parents=True, exist_ok=True)
            fs.get_file(key, str(target))


def remove_url(url: str) -> None:
    """Remove everything under `url`; nothing there is fine."""
    fs, root = filesystem(url)
    if fs.exists(root):
        fs.rm(root, recursive=True)


def join_url(base: str, *parts: str) -> str:
    return "/".join([base.rstrip("/"), *parts])
