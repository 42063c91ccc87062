"""The backends' fixtures: one local Ray instance per module that asks for it."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from tests.conftest import allow_process_tree


@pytest.fixture(scope="module")
def ray_backend(s3_endpoint: str) -> Iterator[Any]:
    """A local Ray instance (4 logical CPUs) for the module; its processes and its session
    folder are not leaks. Started after the local S3, so that Ray's workers inherit its
    address."""
    pytest.importorskip("ray", reason="the Ray backend needs scaletune[ray]")
    from scaletune.cluster import RayBackend

    before = {child.pid for child in psutil.Process().children()}
    # Not the first test's own temp folder, and a short one: Ray's socket paths must fit in
    # 107 bytes, which pytest-xdist's temp folders (.../popen-gw1/...) leave no room for.
    folder = tempfile.mkdtemp(prefix="st-ray-", dir="/tmp")
    try:
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(tempfile, "tempdir", folder)
            patch.setenv("TMPDIR", folder)
            backend = RayBackend(num_cpus=4)
        started = {child.pid for child in psutil.Process().children()} - before
        with allow_process_tree(started):
            yield backend
            backend.close()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
