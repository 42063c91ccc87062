"""How long a store operation waits for a database that stopped answering: a server restarted,
a connection dropped, another process holding SQLite's write lock. Such an error is retried
with backoff until the store answers or the patience runs out; any other error is not.

A write whose connection broke mid-commit may or may not have landed. Updates and deletes
are retried as they are (running one twice changes nothing); an insert is retried only after
asking whether it landed (`landed`), so that nothing is written twice."""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar

from sqlalchemy.exc import DBAPIError, DisconnectionError, SQLAlchemyError

from scaletune.errors import StoreUnavailableError

logger = logging.getLogger("scaletune.store")

T = TypeVar("T")
P = ParamSpec("P")

# PostgreSQL's SQLSTATE classes that a later try can get past: 08 the connection, 57 an
# operator's intervention (a shutdown, `pg_terminate_backend`, a cancelled statement), 53 too
# many connections or out of resources, 40 a serialisation failure or deadlock.
_TRANSIENT_SQLSTATE_CLASSES = frozenset({"08", "57", "53", "40"})
_SQLITE_BUSY = ("database is locked", "database is busy", "database table is locked")


def is_transient(exc: BaseException) -> bool:
    """Whether `exc` says the database is unreachable or busy for now, not that the
    statement is wrong."""
    if isinstance(exc, DisconnectionError):
        return True
    if not isinstance(exc, DBAPIError):
        return False
    if exc.connection_invalidated:
        return True
    sqlstate = getattr(exc.orig, "sqlstate", "")
    if sqlstate is None:  # psycopg: the client could not reach the server at all
        return True
    if sqlstate:
        return sqlstate[:2] in _TRANSIENT_SQLSTATE_CLASSES
    return any(text in str(exc.orig).lower() for text in _SQLITE_BUSY)


@dataclass(frozen=True)
class Patience:
    """How long one operation waits for the store: `seconds` in all, its tries spaced from
    `first_wait` doubling up to `longest_wait`. `sleep` and `monotonic` are passed in, so a
    test can wait without sleeping."""

    seconds: float
    first_wait: float = 0.1
    longest_wait: float = 5.0
    sleep: Callable[[float], None] = field(default=time.sleep, compare=False, repr=False)
    monotonic: Callable[[], float] = field(default=time.monotonic, compare=False, repr=False)

    def call(
        self,
        operation: Callable[[], T],
        *,
        landed: Callable[[], bool] | None = None,
        describe: str = "store",
    ) -> T | None:
        """`operation`'s result, trying again while the store is unreachable. `landed`, for
        an insert: asked before each retry whether the broken try was committed after all;
        if so the operation is not run again and None is returned."""
        began = self.monotonic()
        wait = self.first_wait
        failed_before = False
        while True:
            try:
                done = failed_before and landed is not None and landed()
                result = None if done else operation()
            except SQLAlchemyError as exc:
                if not is_transient(exc):
                    raise
                waited = self.monotonic() - began
                if waited >= self.seconds:
                    # The patience, not `waited`: the last try may overrun it on a busy machine,
                    # and the line names the setting the user can change.
                    raise StoreUnavailableError(
                        f"{describe} did not answer for {self.seconds:.1f} s: {_first_line(exc)}"
                    ) from exc
                if not failed_before:
                    logger.warning(
                        "%s does not answer (%s); trying again for up to %g s",
                        describe,
                        _first_line(exc),
                        self.seconds,
                    )
                failed_before = True
                self.sleep(min(wait, self.seconds - waited))  # the last try at the bound
                wait = min(wait * 2, self.longest_wait)
                continue
            if failed_before:
                logger.warning("%s answers again after %.1f s", describe, self.monotonic() - began)
            return result


# A controller's store waits out a restart of its server; a command run by hand does not.
CONTROLLER_PATIENCE = Patience(seconds=600.0)
COMMAND_PATIENCE = Patience(seconds=5.0)
NO_WAIT = Patience(seconds=0.0)


class HasPatience(Protocol):
    @property
    def patience(self) -> Patience: ...

    @property
    def describe(self) -> str: ...


SelfT = TypeVar("SelfT", bound=HasPatience)


def patient(method: Callable[Concatenate[SelfT, P], T]) -> Callable[Concatenate[SelfT, P], T]:
    """Run the method again while the store is unreachable, as its owner's patience allows
    (for reads, updates and deletes: running them twice changes nothing)."""

    def wrapper(self: SelfT, /, *args: P.args, **kwargs: P.kwargs) -> T:
        result = self.patience.call(lambda: method(self, *args, **kwargs), describe=self.describe)
        return result  # type: ignore[return-value]  # no `landed`: never None in its place

    functools.update_wrapper(wrapper, method)
    return wrapper


def patient_once(
    landed: Callable[..., bool],
) -> Callable[[Callable[Concatenate[SelfT, P], None]], Callable[Concatenate[SelfT, P], None]]:
    """As `patient`, for a write that must not land twice: `landed(self, *args, **kwargs)`
    says whether a try whose connection broke was committed after all."""

    def decorate(
        method: Callable[Concatenate[SelfT, P], None],
    ) -> Callable[Concatenate[SelfT, P], None]:
        def wrapper(self: SelfT, /, *args: P.args, **kwargs: P.kwargs) -> None:
            self.patience.call(
                lambda: method(self, *args, **kwargs),
                landed=lambda: bool(landed(self, *args, **kwargs)),
                describe=self.describe,
            )

        functools.update_wrapper(wrapper, method)
        return wrapper

    return decorate


def _first_line(exc: BaseException) -> str:
    orig: Any = getattr(exc, "orig", None) or exc
    text = str(orig).strip().splitlines()
    return f"{type(orig).__name__}: {text[0] if text else ''}".rstrip(": ")
