"""The HTML that scaletune writes, from one template set: the console's pages and the static
report of an experiment or a tuning job share the layout, the stylesheet, the macros and the
filters that format numbers, times and statuses. Templates and static files ship as package
data; rendering needs Jinja2 alone (no web server), so the report imports no console."""

from __future__ import annotations

import functools
from importlib.resources import files
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from markupsafe import Markup

from scaletune.views._format import FILTERS, TESTS

STATIC_PACKAGE = ("scaletune.views", "static")  # as Starlette's StaticFiles names a package folder


@functools.cache
def template_environment() -> Environment:
    """The one Jinja2 environment: autoescaped (log lines and notes are text, never markup)."""
    environment = Environment(
        loader=FileSystemLoader(str(files("scaletune.views") / "templates")),
        autoescape=select_autoescape(default=True, default_for_string=True),
        trim_blocks=True,
        lstrip_blocks=True,
    )
    environment.filters.update(FILTERS)
    environment.tests.update(TESTS)
    return environment


@functools.cache
def stylesheet() -> Markup:
    """The console's stylesheet, for pages that must stand alone (a report is one file)."""
    return Markup((files("scaletune.views") / "static" / "console.css").read_text())


def render(name: str, **context: Any) -> str:
    """A template rendered outside the console (no request, no static files served)."""
    return template_environment().get_template(name).render(**context)


__all__ = ["FILTERS", "STATIC_PACKAGE", "render", "stylesheet", "template_environment"]
