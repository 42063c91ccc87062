"""Live pages: one server-sent event stream tells each open page when the store changed.

The page then fetches what it shows again (htmx fragments, chart data). The browser's
EventSource reconnects by itself after a dropped connection (`retry:` says after how long);
a store that cannot be read is an `store-error` event the page shows, not endless loading."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from scaletune.console._state import console_state
from scaletune.errors import StoreError

RECONNECT_MILLISECONDS = 2000
KEEPALIVE_POLLS = 15  # a comment line this often keeps proxies from closing an idle stream


async def events(request: Request) -> Response:
    state = console_state(request)

    def mark() -> str:
        return state.store.browse.change_mark().token()

    async def stream() -> AsyncIterator[str]:
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
            await anyio.sleep(state.poll_seconds)

    return StreamingResponse(
        stream(),
        media_type="text/event-stream",
        headers={"cache-control": "no-cache", "x-accel-buffering": "no"},
    )
