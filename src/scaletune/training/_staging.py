"""Where one job's data shards and model pass between its controller and its workers.

Unset, that is the controller's temporary folder (every worker on this machine). A folder every
node mounts, or an object-storage URL, lets workers run on other machines: the controller
writes the shards there, each worker reads only its rows, and rank 0 leaves the model there
for the controller to publish.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
from dataclasses import dataclass
from pathlib import Path

from scaletune.data import filesystem, get_folder, join_url, remove_url
from scaletune.errors import InvalidInputError
from scaletune.spec import ChannelName
from scaletune.training._paths import SCRATCH_PREFIX


@dataclass(frozen=True)
class JobStaging:
    """`root` is a local (or shared) folder, or a URL (str). Workers write the model to
    `model_dir` on their own machine; with a URL root they then upload it to `model_url`."""

    root: Path | str
    scratch: Path  # the controller's own temp folder (the stop file, the fetched model)

    @classmethod
    def create(cls, staging: Path | str | None, job_id: str, scratch: Path) -> JobStaging:
        name = f"{SCRATCH_PREFIX}{job_id}-{secrets.token_hex(4)}"
        if staging is None:
            return cls(scratch, scratch)
        if isinstance(staging, str):
            return cls(join_url(staging, name), scratch)
        (staging / name).mkdir(parents=True)
        return cls(staging / name, scratch)

    def data_folder(self, channel: ChannelName) -> Path | str:
        return self.staged("data", channel.value)

    def staged(self, *parts: str) -> Path | str:
        """A place under the staging root: a path, or a URL."""
        if isinstance(self.root, str):
            return join_url(self.root, *parts)
        return self.root.joinpath(*parts)

    @property
    def shared(self) -> bool:
        """Whether workers on other machines see it (not the controller's temp folder)."""
        return self.root != self.scratch

    @property
    def model_dir(self) -> Path:
        """Where rank 0's program writes: in the staging folder, or, with a URL, a folder of
        the worker's own that it uploads to `model_url` once the program ends."""
        if isinstance(self.root, str):
            return self.scratch / "model"  # a placeholder: each worker makes its own
        return self.root / "model"

    @property
    def model_url(self) -> str | None:
        return join_url(self.root, "model") if isinstance(self.root, str) else None

    def prepare(self) -> None:
        if isinstance(self.root, Path):
            self.model_dir.mkdir(parents=True, exist_ok=True)

    def fetch_model(self) -> Path:
        """A local folder holding what rank 0 saved."""
        if self.model_url is None:
            return self.model_dir
        local = self.scratch / "model"
        local.mkdir(parents=True, exist_ok=True)
        get_folder(self.model_url, local)
        return local

    def remove(self) -> None:
        """Everything the job staged goes, whatever its end (a failure here is not the job's)."""
        if isinstance(self.root, str):
            with contextlib.suppress(Exception):
                remove_url(self.root)
        elif self.shared:
            shutil.rmtree(self.root, ignore_errors=True)


def check_writable(location: Path | str | None, key: str) -> None:
    """Refuse, before a job is recorded, a location this controller cannot write (`key` names
    it: cluster.staging, checkpoint.path): one small file is written and removed (a missing
    bucket, credentials, a read-only mount)."""
    staging = location
    if staging is None:
        return
    probe_name = f".scaletune-probe-{secrets.token_hex(4)}"
    if isinstance(staging, Path):
        try:
            staging.mkdir(parents=True, exist_ok=True)
            (staging / probe_name).write_bytes(b"")
            (staging / probe_name).unlink()
        except OSError as exc:
            raise InvalidInputError(
                f"{key} {str(staging)!r} cannot be written: {exc.strerror}"
            ) from None
        return
    try:
        fs, root = filesystem(staging)
    except InvalidInputError as exc:  # an unknown protocol, a package missing for it
        raise InvalidInputError(f"{key} {exc}") from None
    path = join_url(root, probe_name)
    try:
        fs.pipe_file(path, b"")
        fs.rm_file(path)
    except Exception as exc:  # botocore and friends raise their own types
        raise InvalidInputError(
            f"{key} {staging!r} cannot be written: {type(exc).__name__}: {exc}"
        ) from None


def remove_orphaned_staging(staging: Path | str, job_id: str) -> None:
    """What a killed controller left in a staging location."""
    pattern = f"{SCRATCH_PREFIX}{job_id}-*"
    if isinstance(staging, Path):
        for folder in staging.glob(pattern):
            shutil.rmtree(folder, ignore_errors=True)
        return
    with contextlib.suppress(Exception):  # unreachable now: nothing more to do about it
        fs, root = filesystem(staging)
        for key in fs.glob(join_url(root, pattern)):
            fs.rm(key, recursive=True)
