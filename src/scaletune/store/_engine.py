"""How the store talks to its database: one engine for transactions, and one whose connections
stay in autocommit for reads and single-statement writes, so that on a server each of those is
one round trip (no BEGIN, COMMIT or ROLLBACK around it)."""

from __future__ import annotations

import time
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine, make_url
from sqlalchemy.exc import ArgumentError, DisconnectionError, OperationalError

from scaletune.errors import StoreError

SQLITE_BUSY_TIMEOUT_MS = 30_000
# A server connection unused this long is checked before it is handed out (a server restart
# or a firewall drops idle ones); one in use moments ago is not: a ping per checkout would
# add a round trip to every read and write.
IDLE_PING_SECONDS = 5.0
monotonic = time.monotonic  # module-level, so that a test can move it on


def engines_for(url: str) -> tuple[Engine, Engine]:
    """The engine for transactions, and one in autocommit, each with a pool of its own."""
    try:
        parsed = make_url(url)
    except ArgumentError:
        raise StoreError(f"store {url!r} is not a database URL or a file path") from None
    if parsed.get_backend_name() == "sqlite":
        # Two pools: switching a SQLite connection's isolation level runs a PRAGMA at every
        # checkout and checkin, dearer than a second connection to a file.
        options: dict[str, Any] = {"connect_args": {"timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}}
        engine = create_engine(url, **options)
        autocommit = create_engine(url, isolation_level="AUTOCOMMIT", **options)
        for each in (engine, autocommit):
            event.listen(each, "connect", _sqlite_pragmas)
        return engine, autocommit
    if parsed.get_backend_name() == "postgresql":
        if parsed.drivername == "postgresql":
            parsed = parsed.set(drivername="postgresql+psycopg")
        # Two pools here too: a view of one pool in autocommit (execution_options) switches
        # each connection's mode at checkout and back at checkin, which psycopg runs through
        # its wait loop: Python work on every read that a second pool does not need.
        try:
            engine = create_engine(parsed)
            autocommit = create_engine(parsed, isolation_level="AUTOCOMMIT")
        except (ArgumentError, ImportError) as exc:
            raise StoreError(f"store {safe_url(url)!r}: {exc}") from None
        for each in (engine, autocommit):
            event.listen(each, "checkout", _ping_if_idle)
            event.listen(each, "checkin", _stamp_checkin)
        return engine, autocommit
    raise StoreError(f"store {safe_url(url)!r}: only sqlite and postgresql are supported")


def safe_url(url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return url


def _stamp_checkin(_dbapi_connection: Any, record: Any) -> None:
    record.info["checked_in"] = monotonic()


def _ping_if_idle(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
    """SQLAlchemy's pessimistic disconnect handling, for idle connections only: a dead one
    is discarded (DisconnectionError) and the pool hands out another."""
    checked_in = record.info.get("checked_in")
    if checked_in is None or monotonic() - checked_in < IDLE_PING_SECONDS:
        return
    try:
        cursor = dbapi_connection.cursor()
        cursor.execute("SELECT 1")
        cursor.close()
        dbapi_connection.rollback()
    except Exception as exc:
        raise DisconnectionError(f"idle store connection lost: {exc}") from exc


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
    except Exception as exc:  # e.g. a read-only folder: report it as a store problem
        raise OperationalError("PRAGMA journal_mode=WAL", {}, exc) from exc
    cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()
