"""A server connection that died while idle in the pool is replaced, not handed out."""

from __future__ import annotations

import time

import pytest
from sqlalchemy import text

from scaletune.store import Store, _engine
from tests.store.conftest import emptied


@pytest.mark.postgres
def test_an_idle_connection_the_server_dropped_is_replaced(
    monkeypatch: pytest.MonkeyPatch, postgres_database: str
) -> None:
    now = [time.monotonic()]
    monkeypatch.setattr(_engine, "monotonic", lambda: now[0])
    with Store(emptied(postgres_database)) as store:
        assert store.list_tuning_jobs() == []  # one pooled connection, now idle
        with store._autocommit.connect() as conn:
            pid = conn.execute(text("SELECT pg_backend_pid()")).scalar_one()
        killer = Store(postgres_database)
        with killer._autocommit.connect() as conn:
            conn.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
        killer.close()

        now[0] += _engine.IDLE_PING_SECONDS + 1  # idle long enough to be checked
        assert store.list_tuning_jobs() == []  # on a new connection
        with store._autocommit.connect() as conn:
            assert conn.execute(text("SELECT pg_backend_pid()")).scalar_one() != pid


class _Connection:
    """A DBAPI connection that notes what it is asked to run."""

    def __init__(self) -> None:
        self.ran: list[str] = []

    def cursor(self) -> _Connection:
        return self

    def execute(self, statement: str) -> None:
        self.ran.append(statement)

    def close(self) -> None:
        pass

    def rollback(self) -> None:
        self.ran.append("ROLLBACK")


class _Record:
    def __init__(self) -> None:
        self.info: dict[str, float] = {}


def test_only_a_connection_idle_for_a_while_is_pinged(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [100.0]
    monkeypatch.setattr(_engine, "monotonic", lambda: now[0])
    connection, record = _Connection(), _Record()
    _engine._ping_if_idle(connection, record, None)  # new: just connected
    _engine._stamp_checkin(connection, record)
    now[0] += _engine.IDLE_PING_SECONDS / 2
    _engine._ping_if_idle(connection, record, None)  # used moments ago: no round trip
    assert connection.ran == []
    _engine._stamp_checkin(connection, record)
    now[0] += _engine.IDLE_PING_SECONDS + 1
    _engine._ping_if_idle(connection, record, None)
    assert connection.ran == ["SELECT 1", "ROLLBACK"]
