"""The store suites run against SQLite and, when a server is given, PostgreSQL."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, create_engine, make_url, text

from scaletune.store import Store
from scaletune.store._schema import metadata


def _engine(url: str) -> Engine:
    return create_engine(url.replace("postgresql://", "postgresql+psycopg://", 1))


@pytest.fixture(scope="session")
def postgres_database() -> str:
    """The server's database for this test process: one of its own under pytest-xdist (a
    database per worker, made on first use), so that parallel workers never share tables."""
    url = os.environ.get("SCALETUNE_TEST_POSTGRES_URL")
    if not url:
        if os.environ.get("SCALETUNE_REQUIRE_POSTGRES"):
            pytest.fail("SCALETUNE_REQUIRE_POSTGRES is set but SCALETUNE_TEST_POSTGRES_URL is not")
        pytest.skip("no PostgreSQL server: set SCALETUNE_TEST_POSTGRES_URL (see .ci/run)")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:  # not under xdist: the database as given
        return url
    server = _engine(url).execution_options(isolation_level="AUTOCOMMIT")
    name = f"{make_url(url).database}_{worker}"
    try:
        with server.connect() as connection:
            exists = connection.execute(
                text("SELECT 1 FROM pg_database WHERE datname = :name"), {"name": name}
            ).first()
            if exists is None:
                connection.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        server.dispose()
    return make_url(url).set(database=name).render_as_string(hide_password=False)


def emptied(url: str) -> str:
    engine = _engine(url)
    metadata.drop_all(engine)  # each test starts from an empty database
    engine.dispose()
    return url


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'scaletune.db'}"
    return emptied(request.getfixturevalue("postgres_database"))


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    with Store(store_url) as opened:
        yield opened
