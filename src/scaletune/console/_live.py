"""Live pages: one server-sent event stream tells each open page when the store changed.

The page then fetches what it shows again (htmx fragments, chart data). The browser's
EventSource reconnects by itself after a dropped connection (`retry:` says after how long);
a store that cannot be read is an `store-error` event the page shows, not endless loading."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from scaletune.console._state import console_state
from scaletune.errors import StoreError

RECONNECT_MILLISECONDS = 2000
BUSY_RETRY_MILLISECONDS = 15_000  # a page turned away asks again this much later
KEEPALIVE_POLLS = 15  # a comment line this often keeps proxies from closing an idle stream
_HEADERS = {"cache-control": "no-cache", "x-accel-buffering": "no"}


async def events(request: Request) -> Response:
    state = console_state(request)
    # Asked again at the next poll: a stream never holds a worker thread through an outage.
    hurried = state.store.without_waiting()

    def mark() -> str:
        return hurried.browse.change_mark().token()

    async def stream() -> AsyncIterator[str]:
        if not state.streams.take():
            # Turned away in the stream's own terms, so that the page can say why and its
            # EventSource asks again later by itself (a refused status would just fail it).
            yield f"retry: {BUSY_RETRY_MILLISECONDS}\n\n"
            yield (
                f"event: busy\ndata: this console serves at most {state.streams.limit} live "
                "pages at once (--max-live-pages); this one tries again shortly\n\n"
            )
            return
        try:
            async for event in _changes(state.poll_seconds, mark):
                yield event
        finally:  # the page went away (its connection closed): its slot is free again
            state.streams.give_back()

    return StreamingResponse(stream(), media_type="text/event-stream", headers=_HEADERS)


async def _changes(poll_seconds: float, mark: Callable[[], str]) -> AsyncIterator[str]:
    yield f"retry: {RECONNECT_MILLISECONDS}\n\n"
    last, quiet = None, 0
    while True:
        try:
            now = await run_in_threadpool(mark)
        except (StoreError, SQLAlchemyError) as exc:
            text = (str(exc).splitlines() or [exc.__class__.__name__])[0]
            yield f"event: store-error\ndata: {text}\n\n"
            last = None
        else:
            if now != last:
                last, quiet = now, 0
                yield f"event: change\ndata: {now}\n\n"
            else:
                quiet += 1
                if quiet % KEEPALIVE_POLLS == 0:
                    yield ": still here\n\n"
        await anyio.sleep(poll_seconds)
