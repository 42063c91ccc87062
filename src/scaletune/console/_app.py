"""The console's ASGI application: routes, templates, the store it reads and the rules of
access around them."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator
from typing import Any

from sqlalchemy.exc import SQLAlchemyError
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from scaletune.console import _data, _live, _pages
from scaletune.console._security import CSRF_FIELD, Access, AccessMiddleware
from scaletune.console._state import (
    DEFAULT_MAX_STREAMS,
    ConsoleState,
    StreamSlots,
    console_state,
)
from scaletune.errors import JobNotFoundError, ScaletuneError, StoreError
from scaletune.store import Store
from scaletune.views import STATIC_PACKAGE, template_environment

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "[::1]")


def create_app(
    store: Store,
    access: Access,
    allowed_hosts: list[str] | None = None,
    poll_seconds: float = 1.0,
    max_streams: int = DEFAULT_MAX_STREAMS,
) -> Starlette:
    """The console over an open store (the caller closes it). `allowed_hosts`: the Host
    header values it answers to (default: loopback names only); `max_streams`: the live
    pages it serves at once."""
    templates = Jinja2Templates(env=template_environment())
    state = ConsoleState(store, access, templates, poll_seconds, streams=StreamSlots(max_streams))

    def context(request: Request) -> dict[str, Any]:
        return {
            "read_only": access.read_only,
            "csrf_token": access.csrf_token,
            "csrf_field": CSRF_FIELD,
        }

    templates.context_processors.append(context)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        # Optuna's importance evaluator takes seconds to import: loaded while pages are read
        threading.Thread(target=_warm_up, name="console-warm-up", daemon=True).start()
        yield

    app = Starlette(
        lifespan=lifespan,
        routes=[
            *_pages.routes(),
            *_data.routes(),
            Route("/events", _live.events),
            Mount("/static", StaticFiles(packages=[STATIC_PACKAGE]), name="static"),
        ],
        middleware=[
            Middleware(TrustedHostMiddleware, allowed_hosts=allowed_hosts or list(LOOPBACK_NAMES)),
            Middleware(AccessMiddleware, access=access),
        ],
        exception_handlers={
            JobNotFoundError: _not_found,
            HTTPException: _http_error,
            StoreError: _store_error,
            SQLAlchemyError: _store_error,
            ScaletuneError: _bad_request,
        },
    )
    app.state.console = state
    return app


def _warm_up() -> None:
    import optuna.importance  # noqa: F401


def _error_page(request: Request, status: int, title: str, message: str) -> Response:
    templates = console_state(request).templates
    if request.headers.get("accept", "").startswith("application/json"):
        return JSONResponse({"error": message}, status_code=status)
    return templates.TemplateResponse(
        request, "error.html", {"title": title, "message": message}, status_code=status
    )


async def _not_found(request: Request, exc: Exception) -> Response:
    return _error_page(request, 404, "Not found", str(exc))


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, HTTPException)
    if exc.status_code == 405:
        return Response("405: method not allowed", status_code=405, headers=exc.headers)
    return _error_page(request, exc.status_code, f"Error {exc.status_code}", str(exc.detail))


async def _store_error(request: Request, exc: Exception) -> Response:
    first = str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__
    return _error_page(request, 503, "The store cannot be read", first)


async def _bad_request(request: Request, exc: Exception) -> Response:
    return _error_page(request, 400, "Bad request", str(exc))
