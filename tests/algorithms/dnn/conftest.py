from __future__ import annotations

from collections.abc import Iterator

import pytest

from scaletune.algorithms.dnn._ps_client import ParameterServerClient


@pytest.fixture
def clients() -> Iterator[list[ParameterServerClient]]:
    """The clients a test opens (`servers.connect`), closed after it."""
    opened: list[ParameterServerClient] = []
    yield opened
    for client in opened:
        client.close()
