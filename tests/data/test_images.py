"""Image datasets: IDX files, MNIST as three channels, the bundled digits, downloads."""

from __future__ import annotations

import gzip
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest

from scaletune.data import (
    IMAGES_MAGIC,
    LABELS_MAGIC,
    download_mnist,
    prepare_digits,
    prepare_mnist,
    read_idx,
)
from scaletune.errors import InvalidInputError
from tests.conftest import SHARED_DATA

MNIST = SHARED_DATA / "mnist"


def _write_idx(path: Path, magic: int, array: np.ndarray, *, gz: bool = False) -> Path:
    header = struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in array.shape)
    content = header + array.astype(np.uint8).tobytes()
    path.write_bytes(gzip.compress(content) if gz else content)
    return path


def _fake_mnist(folder: Path, n_train: int = 5003, n_test: int = 7) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for stem, n in (("train", n_train), ("t10k", n_test)):
        _write_idx(
            folder / f"{stem}-images-idx3-ubyte.gz",
            IMAGES_MAGIC,
            rng.integers(0, 256, (n, 28, 28)),
            gz=True,
        )
        _write_idx(folder / f"{stem}-labels-idx1-ubyte", LABELS_MAGIC, rng.integers(0, 10, n))
    return folder


def test_reads_gzipped_and_plain_idx(tmp_path: Path) -> None:
    array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    for gz in (False, True):
        path = _write_idx(tmp_path / f"x{gz}", IMAGES_MAGIC, array, gz=gz)
        np.testing.assert_array_equal(read_idx(path, IMAGES_MAGIC), array)


def test_wrong_magic_number_is_named(tmp_path: Path) -> None:
    path = _write_idx(tmp_path / "labels", LABELS_MAGIC, np.zeros(3))
    with pytest.raises(InvalidInputError, match="has magic number 2049, expected 2051"):
        read_idx(path, IMAGES_MAGIC)


def test_truncated_idx_is_refused(tmp_path: Path) -> None:
    path = _write_idx(tmp_path / "images", IMAGES_MAGIC, np.zeros((2, 2, 2)))
    path.write_bytes(path.read_bytes()[:-1])
    with pytest.raises(InvalidInputError, match="declares 2x2x2 values but holds 7"):
        read_idx(path, IMAGES_MAGIC)


def test_mismatched_image_and_label_counts(tmp_path: Path) -> None:
    folder = _fake_mnist(tmp_path / "mnist")
    _write_idx(folder / "t10k-labels-idx1-ubyte", LABELS_MAGIC, np.zeros(6))
    with pytest.raises(InvalidInputError, match=r"holds 7 images but .* holds 6 labels"):
        prepare_mnist(folder)


def test_missing_file_is_named(tmp_path: Path) -> None:
    folder = _fake_mnist(tmp_path / "mnist")
    (folder / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(InvalidInputError, match="has no t10k-labels-idx1-ubyte"):
        prepare_mnist(folder)


def test_fake_mnist_splits_and_scales(tmp_path: Path) -> None:
    tables = prepare_mnist(_fake_mnist(tmp_path / "mnist"))
    assert {name: t.n_rows for name, t in tables.items()} == {
        "train": 3,
        "validation": 5000,
        "test": 7,
    }
    assert tables["train"].n_features == 784
    assert tables["test"].features.min() >= 0.0 and tables["test"].features.max() <= 1.0


@pytest.mark.skipif(not MNIST.exists(), reason="shared MNIST is missing")
def test_real_mnist() -> None:
    tables = prepare_mnist(MNIST)
    assert {name: t.n_rows for name, t in tables.items()} == {
        "train": 55_000,
        "validation": 5_000,
        "test": 10_000,
    }
    assert np.bincount(tables["test"].labels.astype(int)).tolist()[:2] == [980, 1135]


def test_digits_are_scaled_and_split() -> None:
    tables = prepare_digits()
    assert sum(t.n_rows for t in tables.values()) == 1797
    assert tables["train"].n_features == 64
    assert tables["train"].features.max() == 1.0


@pytest.mark.skipif(not MNIST.exists(), reason="shared MNIST is missing")
def test_download_checks_content_and_keeps_valid_files(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    shutil.copytree(MNIST, mirror)
    folder = download_mnist(tmp_path / "cache", mirror=mirror.as_uri() + "/")
    assert len(prepare_mnist(folder)["test"].labels) == 10_000
    download_mnist(folder, mirror="file:///nonexistent/")  # all valid: nothing is fetched


def test_download_refuses_wrong_content(tmp_path: Path) -> None:
    mirror = _fake_mnist(tmp_path / "mirror")
    target = tmp_path / "cache"
    with pytest.raises(InvalidInputError, match=r"content MD5 .*, expected 6bbc9ace"):
        download_mnist(target, mirror=mirror.as_uri() + "/")
    assert list(target.iterdir()) == []  # nothing half-written is kept
