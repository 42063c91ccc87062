"""Checkpoints are published whole or not at all: a save killed half-way, a damaged file or
a write that fails leaves the previous complete checkpoint as the one that loads."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from scaletune.checkpoints import CheckpointError, CheckpointFolder
from tests.conftest import wait_until

REPOSITORY = Path(__file__).resolve().parents[2]


def test_saved_checkpoints_load_back_newest_first_and_only_keep_are_kept(tmp_path: Path) -> None:
    folder = CheckpointFolder(tmp_path / "job")
    assert folder.latest() is None
    for step in (10, 20, 30):
        folder.save(step, {"model.bin": bytes([step]) * 100}, {"epoch": step // 10})
    latest = folder.latest()
    assert latest is not None and latest.step == 30 and latest.meta == {"epoch": 3}
    assert folder.load(latest) == {"model.bin": bytes([30]) * 100}
    folder.prune(2)
    assert [c.step for c in folder.complete()] == [20, 30]
    folder.remove()
    assert not (tmp_path / "job").exists()


def test_a_damaged_file_is_never_loaded_the_one_before_is(tmp_path: Path) -> None:
    folder = CheckpointFolder(tmp_path)
    folder.save(1, {"a": b"first"})
    saved = folder.save(2, {"a": b"second"})
    Path(saved.location, "a").write_bytes(b"secoNd")  # same size, other bytes
    latest = folder.latest()
    assert latest is not None and latest.step == 1
    with pytest.raises(CheckpointError, match="does not match its manifest"):
        folder.load(saved)


class _BlocksOnSecondFile(Mapping[str, bytes]):
    """Files whose second one never comes: the save stops between two files."""

    def __init__(self, written: Path) -> None:
        self._written = written

    def __getitem__(self, name: str) -> bytes:
        if name not in ("first.bin", "second.bin"):
            raise KeyError(name)
        return b"x" * 1000

    def __len__(self) -> int:
        return 2

    def __iter__(self) -> Iterator[str]:
        yield "first.bin"
        self._written.touch()  # the first file is on disk
        threading.Event().wait()
        yield "second.bin"


def _in_a_process(call: str, *args: str) -> subprocess.Popen[str]:
    """`call` (a function of this module) in a process of its own, to kill or to limit."""
    code = f"import sys; from tests.checkpoints.test_folder import {call}; {call}(*sys.argv[1:])"
    return subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=REPOSITORY,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def save_forever(root: str, marker: str) -> None:
    CheckpointFolder(root).save(2, _BlocksOnSecondFile(Path(marker)))


def test_a_save_killed_half_way_leaves_the_previous_checkpoint(tmp_path: Path) -> None:
    folder = CheckpointFolder(tmp_path / "job")
    folder.save(1, {"first.bin": b"one"})
    marker = tmp_path / "first-written"
    process = _in_a_process("save_forever", str(tmp_path / "job"), str(marker))
    try:
        wait_until(marker.exists, timeout=60)
        os.kill(process.pid, signal.SIGKILL)  # mid-save: one file written, no manifest
    finally:
        process.communicate(timeout=30)
    assert process.returncode == -signal.SIGKILL
    assert (tmp_path / "job" / "step-000000002" / "first.bin").exists()
    latest = folder.latest()
    assert latest is not None and latest.step == 1
    folder.save(3, {"first.bin": b"three"})
    folder.prune(1)  # the torn step 2 goes with the older complete one
    assert sorted(p.name for p in (tmp_path / "job").iterdir()) == ["step-000000003"]


def save_with_a_file_size_limit(root: str) -> None:
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails instead
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))
    try:
        CheckpointFolder(root).save(2, {"model.bin": b"x" * 100_000})
        print("saved")
    except CheckpointError as exc:
        print(exc)


def test_a_write_that_fails_fails_the_save_not_the_last_good_checkpoint(tmp_path: Path) -> None:
    folder = CheckpointFolder(tmp_path)
    folder.save(1, {"model.bin": b"good"})
    outcome, _ = _in_a_process("save_with_a_file_size_limit", str(tmp_path)).communicate(timeout=60)
    assert outcome.startswith("checkpoint at step 2 not saved to")
    assert "File too large" in outcome  # the kernel refused the write (EFBIG)
    latest = folder.latest()
    assert latest is not None and latest.step == 1
    assert folder.load(latest) == {"model.bin": b"good"}


def test_object_storage_checkpoints_publish_their_manifest_last(s3_endpoint: str) -> None:
    import s3fs

    s3fs.S3FileSystem().mkdir("checkpoints")
    folder = CheckpointFolder("s3://checkpoints/job-1")
    folder.save(5, {"booster.ubj": b"trees"})
    folder.save(9, {"booster.ubj": b"more trees"})
    s3fs.S3FileSystem().rm("checkpoints/job-1/step-000000009/MANIFEST.json")  # never arrived
    latest = folder.latest()
    assert latest is not None and latest.step == 5
    assert folder.load(latest) == {"booster.ubj": b"trees"}
    folder.remove()
    assert CheckpointFolder("s3://checkpoints/job-1").complete() == []
