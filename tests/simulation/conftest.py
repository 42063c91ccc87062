from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scaletune.store import Store


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A store of its own for simulated tuning jobs."""
    with Store(f"sqlite:///{tmp_path / 'sim.db'}") as opened:
        yield opened
