"""The store suites run against SQLite and, when a server is given, PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine

from scaletune.store import Store
from scaletune.store._schema import metadata


def _postgres_url() -> str:
    url = os.environ.get("SCALETUNE_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("SCALETUNE_REQUIRE_POSTGRES"):
            pytest.fail("SCALETUNE_REQUIRE_POSTGRES is set but SCALETUNE_TEST_POSTGRES_URL is not")
        pytest.skip("no PostgreSQL server: set SCALETUNE_TEST_POSTGRES_URL (see .ci/run)")
    engine = create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))
    metadata.drop_all(engine)  # each test starts from an empty database
    engine.dispose()
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'scaletune.db'}"
    return _postgres_url()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with Store(store_url) as opened:
        yield opened
