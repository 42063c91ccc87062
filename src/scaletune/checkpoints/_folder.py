"""One job's checkpoints in a folder or at a URL, written so that no reader sees half of one."""

from __future__ import annotations

import hashlib
import json
import os
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fsspec.implementations.local import LocalFileSystem

from scaletune.data import filesystem, join_url
from scaletune.errors import ScaletuneError

MANIFEST = "MANIFEST.json"
_STEP_FOLDER = re.compile(r"^step-(\d{9,})$")


class CheckpointError(ScaletuneError):
    """A checkpoint could not be written or read whole; the message names it."""


@dataclass(frozen=True)
class FileEntry:
    size: int
    sha256: str


@dataclass(frozen=True)
class Checkpoint:
    step: int
    location: str  # its folder: a path or a URL
    files: Mapping[str, FileEntry]
    meta: Mapping[str, Any] = field(default_factory=dict)
    saved_at: float | None = None


class CheckpointFolder:
    """`<root>/step-NNNNNNNNN/{files…, MANIFEST.json}`; the manifest is published last, in one
    step (a rename on a filesystem, one PUT on object storage), so it is there only once every
    file it lists was written and read back at its size."""

    def __init__(self, root: Path | str) -> None:
        self.root = str(root)
        self._fs, self._path = filesystem(self.root)
        self._local = isinstance(self._fs, LocalFileSystem)

    def save(
        self,
        step: int,
        files: Mapping[str, bytes],
        meta: Mapping[str, Any] | None = None,
        *,
        saved_at: float | None = None,
    ) -> Checkpoint:
        if MANIFEST in files:
            raise CheckpointError(f"a checkpoint file may not be named {MANIFEST!r}")
        folder = self._folder(step)
        try:
            if self._fs.exists(folder):  # a save of this step that did not finish
                self._fs.rm(folder, recursive=True)
            self._fs.makedirs(folder, exist_ok=True)
            entries = {}
            for name, content in files.items():
                self._write(join_url(folder, name), content)
                entries[name] = FileEntry(len(content), hashlib.sha256(content).hexdigest())
            for name, entry in entries.items():
                found = self._fs.size(join_url(folder, name))
                if found != entry.size:
                    raise CheckpointError(
                        f"checkpoint {folder!r}: {name} has {found} bytes, not {entry.size}"
                    )
            manifest = {
                "step": step,
                "saved_at": saved_at,
                "meta": dict(meta or {}),
                "files": {name: vars(entry) for name, entry in entries.items()},
            }
            self._publish(folder, json.dumps(manifest, indent=1).encode())
        except CheckpointError:
            raise
        except Exception as exc:  # a full disk, credentials, the network
            raise CheckpointError(
                f"checkpoint at step {step} not saved to {self.root!r}: {type(exc).__name__}: {exc}"
            ) from None
        return Checkpoint(step, folder, entries, dict(meta or {}), saved_at)

    def complete(self) -> list[Checkpoint]:
        """Every checkpoint whose manifest was published, oldest first (files not read)."""
        found = []
        for step, folder in self._step_folders():
            checkpoint = self._read_manifest(step, folder)
            if checkpoint is not None:
                found.append(checkpoint)
        return found

    def latest(self, usable: Callable[[Checkpoint], bool] | None = None) -> Checkpoint | None:
        """The newest checkpoint whose every file is whole: read and checked against its
        manifest (and, if given, `usable`). A damaged newer one is passed over for the one
        before."""
        for checkpoint in reversed(self.complete()):
            if usable is not None and not usable(checkpoint):
                continue
            try:
                self.load(checkpoint)
            except CheckpointError:
                continue
            return checkpoint
        return None

    def at(self, step: int) -> Checkpoint:
        checkpoint = self._read_manifest(step, self._folder(step))
        if checkpoint is None:
            raise CheckpointError(f"no complete checkpoint at step {step} in {self.root!r}")
        return checkpoint

    def load(self, checkpoint: Checkpoint) -> dict[str, bytes]:
        """Its files, each checked against the manifest's size and digest."""
        files = {}
        for name, entry in checkpoint.files.items():
            path = join_url(checkpoint.location, name)
            try:
                content = self._fs.cat_file(path)
            except Exception as exc:
                raise CheckpointError(
                    f"checkpoint {path!r} cannot be read: {type(exc).__name__}: {exc}"
                ) from None
            if len(content) != entry.size or hashlib.sha256(content).hexdigest() != entry.sha256:
                raise CheckpointError(f"checkpoint file {path!r} does not match its manifest")
            files[name] = content
        return files

    def prune(self, keep: int) -> None:
        """Keep the newest `keep` complete checkpoints; remove older ones and any torn save
        older than the newest complete one."""
        complete = self.complete()
        kept = {checkpoint.step for checkpoint in complete[-keep:]}
        newest = complete[-1].step if complete else -1
        for step, folder in self._step_folders():
            if step not in kept and step <= newest:
                self._fs.rm(folder, recursive=True)

    def remove(self) -> None:
        if self._fs.exists(self._path):
            self._fs.rm(self._path, recursive=True)

    def _folder(self, step: int) -> str:
        return join_url(self._path, f"step-{step:09d}")

    def _step_folders(self) -> list[tuple[int, str]]:
        # Other processes (the workers) write here: a listing cached by s3fs and friends
        # would hide their newest checkpoints.
        self._fs.invalidate_cache(self._path)
        if not self._fs.exists(self._path):
            return []
        found = []
        for entry in self._fs.ls(self._path, detail=False):
            match = _STEP_FOLDER.match(str(entry).rstrip("/").rsplit("/", 1)[-1])
            if match:
                found.append((int(match.group(1)), self._folder(int(match.group(1)))))
        return sorted(found)

    def _read_manifest(self, step: int, folder: str) -> Checkpoint | None:
        try:
            raw = json.loads(self._fs.cat_file(join_url(folder, MANIFEST)))
            files = {
                str(name): FileEntry(int(entry["size"]), str(entry["sha256"]))
                for name, entry in raw["files"].items()
            }
            if int(raw["step"]) != step:
                return None
            return Checkpoint(step, folder, files, dict(raw.get("meta") or {}), raw.get("saved_at"))
        except FileNotFoundError:
            return None
        except (ValueError, KeyError, TypeError, AttributeError):  # not a manifest we wrote
            return None

    def _write(self, path: str, content: bytes) -> None:
        if not self._local:
            self._fs.pipe_file(path, content)
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)  # a script's files may nest
        with open(path, "wb") as file:  # on disk before the manifest says it is
            file.write(content)
            file.flush()
            os.fsync(file.fileno())

    def _publish(self, folder: str, manifest: bytes) -> None:
        target = join_url(folder, MANIFEST)
        if not self._local:
            self._fs.pipe_file(target, manifest)  # an object appears whole or not at all
            return
        aside = join_url(folder, f".{MANIFEST}.{secrets.token_hex(4)}")
        self._write(aside, manifest)
        os.replace(aside, target)
        directory = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(directory)  # the rename itself survives a power cut
        finally:
            os.close(directory)
