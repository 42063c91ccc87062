"""The backends' fixtures: one local Ray instance per module that asks for it."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from typing import Any

import psutil
import pytest

from tests.conftest import allow_process_tree


@pytest.fixture(scope="module")
def ray_backend(s3_endpoint: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A local Ray instance (4 logical CPUs) for the module; its processes and its session
    folder are not leaks. Started after the local S3, so that Ray's workers inherit its
    address."""
    pytest.importorskip("ray", reason="the Ray backend needs scaletune[ray]")
    from scaletune.cluster import RayBackend

    before = {child.pid for child in psutil.Process().children()}
    with pytest.MonkeyPatch.context() as patch:  # not the first test's own temp folder
        folder = tmp_path_factory.mktemp("ray")
        patch.setattr(tempfile, "tempdir", str(folder))
        patch.setenv("TMPDIR", str(folder))
        backend = RayBackend(num_cpus=4)
    started = {child.pid for child in psutil.Process().children()} - before
    with allow_process_tree(started):
        yield backend
        backend.close()
