"""`scaletune console`: a live web console over the store (training jobs, tuning jobs, their
charts and logs, Stop buttons), served by Starlette and uvicorn with no build step: the
templates, the page scripts and the vendored htmx and uPlot ship as package data."""

from scaletune.console._app import create_app
from scaletune.console._security import Access
from scaletune.console._server import DEFAULT_PORT, Console, open_console

__all__ = ["DEFAULT_PORT", "Access", "Console", "create_app", "open_console"]
