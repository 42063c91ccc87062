"""Image datasets as tables: each row a flattened square grey image scaled to [0, 1]."""

from __future__ import annotations

import gzip
import hashlib
import os
import shutil
import tempfile
import urllib.request
from pathlib import Path

import numpy as np
import numpy.typing as npt

from scaletune.data._bundled import SPLIT_FRACTIONS, SPLIT_SEED
from scaletune.data._idx import IMAGES_MAGIC, LABELS_MAGIC, read_idx
from scaletune.data._table import Table
from scaletune.errors import InvalidInputError

MNIST_VALIDATION_ROWS = 5_000  # the last rows of the training file, as a fixed validation split
MNIST_FILES = {
    "train-images": "train-images-idx3-ubyte",
    "train-labels": "train-labels-idx1-ubyte",
    "test-images": "t10k-images-idx3-ubyte",
    "test-labels": "t10k-labels-idx1-ubyte",
}
# MD5 of each file's decompressed content, as published with the official release. Checked
# on content rather than on the .gz so that any faithful re-compression is accepted.
MNIST_CONTENT_MD5 = {
    "train-images-idx3-ubyte": "6bbc9ace898e44ae57da46a324031adb",
    "train-labels-idx1-ubyte": "a25bea736e30d166cdddb491f175f624",
    "t10k-images-idx3-ubyte": "2646ac647ad5339dbf082846283269ea",
    "t10k-labels-idx1-ubyte": "27ae3e4e09519cfbb04c329615203637",
}
MNIST_MIRROR = "https://ossci-datasets.s3.amazonaws.com/mnist/"


def prepare_digits() -> dict[str, Table]:
    """scikit-learn's bundled 8x8 digits (1,797 images, 10 classes), split 70/15/15."""
    from sklearn.datasets import load_digits  # a heavy import, for this dataset only

    bunch = load_digits()
    features = np.asarray(bunch.data, dtype=np.float32) / 16.0
    labels = np.asarray(bunch.target, dtype=np.float32)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(labels))
    cut_train = int(SPLIT_FRACTIONS[0] * len(order))
    cut_validation = int((SPLIT_FRACTIONS[0] + SPLIT_FRACTIONS[1]) * len(order))
    parts = {
        "train": order[:cut_train],
        "validation": order[cut_train:cut_validation],
        "test": order[cut_validation:],
    }
    return {
        split: Table(features[rows], labels[rows], f"digits:{split}")
        for split, rows in parts.items()
    }


def prepare_mnist(folder: Path) -> dict[str, Table]:
    """MNIST from its four IDX files (gzipped or not) in `folder`: train = the first 55,000
    training images, validation = the last 5,000, test = the 10,000 t10k images."""
    if not folder.is_dir():
        raise InvalidInputError(f"MNIST folder {str(folder)!r} is not a directory")
    train_x, train_y = _images_and_labels(folder, "train")
    test_x, test_y = _images_and_labels(folder, "test")
    cut = len(train_y) - MNIST_VALIDATION_ROWS
    if cut < 1:
        raise InvalidInputError(
            f"MNIST training file in {str(folder)!r} has {len(train_y)} images, too few to hold "
            f"out {MNIST_VALIDATION_ROWS} for validation"
        )
    return {
        "train": Table(train_x[:cut], train_y[:cut], "mnist:train"),
        "validation": Table(train_x[cut:], train_y[cut:], "mnist:validation"),
        "test": Table(test_x, test_y, "mnist:test"),
    }


def _images_and_labels(
    folder: Path, split: str
) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.float32]]:
    images_path = _find(folder, MNIST_FILES[f"{split}-images"])
    labels_path = _find(folder, MNIST_FILES[f"{split}-labels"])
    images = read_idx(images_path, IMAGES_MAGIC)
    labels = read_idx(labels_path, LABELS_MAGIC)
    if len(images) != len(labels):
        raise InvalidInputError(
            f"{str(images_path)!r} holds {len(images)} images but {str(labels_path)!r} holds "
            f"{len(labels)} labels"
        )
    features = images.reshape(len(images), -1).astype(np.float32) / 255.0
    return features, labels.astype(np.float32)


def _find(folder: Path, stem: str) -> Path:
    for candidate in (folder / f"{stem}.gz", folder / stem):
        if candidate.exists():
            return candidate
    raise InvalidInputError(f"MNIST folder {str(folder)!r} has no {stem}(.gz)")


def default_mnist_folder() -> Path:
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    return cache / "scaletune" / "mnist"


def download_mnist(folder: Path, mirror: str = MNIST_MIRROR) -> Path:
    """Fetch the four MNIST files into `folder` (for users online), checking each one's
    content against the official MD5 before it is kept. Files already there and valid stay."""
    folder.mkdir(parents=True, exist_ok=True)
    for stem, md5 in MNIST_CONTENT_MD5.items():
        target = folder / f"{stem}.gz"
        if target.exists() and _content_md5(target) == md5:
            continue
        url = f"{mirror}{stem}.gz"
        with tempfile.NamedTemporaryFile(dir=folder, prefix=f".{stem}-", delete=False) as part:
            staged = Path(part.name)
            try:
                with urllib.request.urlopen(url, timeout=60) as response:
                    shutil.copyfileobj(response, part)
            except OSError as exc:
                staged.unlink(missing_ok=True)
                raise InvalidInputError(f"could not download {url!r}: {exc}") from None
        actual = _content_md5(staged)
        if actual != md5:
            staged.unlink(missing_ok=True)
            raise InvalidInputError(f"{url!r} has content MD5 {actual}, expected {md5}")
        staged.replace(target)
    return folder


def _content_md5(path: Path) -> str:
    digest = hashlib.md5(usedforsecurity=False)
    try:
        with gzip.open(path, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    except (OSError, EOFError):
        return "unreadable"
    return digest.hexdigest()
