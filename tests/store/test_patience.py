"""How long a store operation waits for a database that stopped answering (no real waits:
the patience's sleep and clock are the test's)."""

from __future__ import annotations

import logging
import sqlite3

import pytest
from sqlalchemy.exc import IntegrityError, OperationalError

from scaletune.errors import StoreUnavailableError
from scaletune.store import Patience
from scaletune.store._patience import is_transient
from tests.conftest import SleepingClock


def _locked() -> OperationalError:
    return OperationalError("INSERT ...", {}, sqlite3.OperationalError("database is locked"))


class _PgError(Exception):
    def __init__(self, sqlstate: str | None) -> None:
        super().__init__(f"sqlstate {sqlstate}")
        self.sqlstate = sqlstate


def _patience(clock: SleepingClock, seconds: float) -> Patience:
    return Patience(seconds=seconds, sleep=clock.sleep, monotonic=clock.monotonic)


def test_an_operation_is_tried_again_with_backoff_until_the_store_answers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    clock, tries = SleepingClock(), []

    def operation() -> str:
        tries.append(clock.now)
        if len(tries) < 5:
            raise _locked()
        return "done"

    caplog.set_level(logging.WARNING, logger="scaletune.store")
    assert _patience(clock, 60).call(operation, describe="store 'x'") == "done"
    assert clock.slept == [0.1, 0.2, 0.4, 0.8]
    assert [r.getMessage() for r in caplog.records] == [
        "store 'x' does not answer (OperationalError: database is locked); trying again for "
        "up to 60 s",
        "store 'x' answers again after 1.5 s",
    ]


def test_past_its_patience_it_raises_one_line_naming_the_store_and_the_cause() -> None:
    clock = SleepingClock()

    def operation() -> None:
        raise _locked()

    with pytest.raises(StoreUnavailableError) as raised:
        _patience(clock, 10).call(operation, describe="store 'x'")
    assert str(raised.value) == (
        "store 'x' did not answer for 10.0 s: OperationalError: database is locked"
    )
    assert clock.slept == pytest.approx([0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 3.7])  # the last: to 10 s


def test_a_last_try_that_overruns_the_patience_still_names_the_patience() -> None:
    # CI saw "did not answer for 0.6 s" for a patience of 0.5 s: the last try took 0.1 s on a
    # loaded machine. The line names the setting, not how late the last refusal came.
    clock = SleepingClock()

    def slow_refusal() -> None:
        clock.now += 0.15
        raise _locked()

    with pytest.raises(StoreUnavailableError, match=r"did not answer for 0\.5 s:"):
        _patience(clock, 0.5).call(slow_refusal, describe="store 'x'")
    assert clock.now > 0.6


def test_without_patience_the_first_failure_is_final() -> None:
    clock = SleepingClock()

    def operation() -> None:
        raise _locked()

    with pytest.raises(StoreUnavailableError):
        _patience(clock, 0).call(operation)
    assert clock.slept == []


def test_a_wrong_statement_is_not_tried_again() -> None:
    tries = []

    def operation() -> None:
        tries.append(1)
        raise IntegrityError("INSERT ...", {}, sqlite3.IntegrityError("UNIQUE failed"))

    with pytest.raises(IntegrityError):
        _patience(SleepingClock(), 60).call(operation)
    assert tries == [1]


def test_a_write_that_landed_before_its_connection_broke_is_not_written_again() -> None:
    rows: list[str] = []

    def insert() -> None:
        rows.append("point")
        if len(rows) == 1:  # committed, then the answer was lost
            raise OperationalError("COMMIT", {}, _PgError("08006"), connection_invalidated=True)

    _patience(SleepingClock(), 60).call(insert, landed=lambda: "point" in rows)
    assert rows == ["point"]


@pytest.mark.parametrize(
    ("orig", "transient"),
    [
        (sqlite3.OperationalError("database is locked"), True),
        (sqlite3.OperationalError("no such table: metric_points"), False),
        (_PgError(None), True),  # the server could not be reached at all
        (_PgError("57P01"), True),  # terminated by an administrator (a restart)
        (_PgError("08006"), True),  # the connection failed
        (_PgError("40P01"), True),  # a deadlock, broken by the server
        (_PgError("42P01"), False),  # no such table
    ],
)
def test_what_counts_as_the_store_being_away(orig: Exception, transient: bool) -> None:
    assert is_transient(OperationalError("SELECT 1", {}, orig)) is transient
