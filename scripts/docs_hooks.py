"""MkDocs hooks (mkdocs.yml `hooks:`): the reference pages generated from the code.

A page line `<!-- generated: NAME -->` is replaced, when the site is built, by the Markdown
that NAME's generator writes: `job-file` from the pydantic models of the job files
(`docs_job_file`), `cli` from the Typer app (`docs_cli`). A generator that fails, or an
unknown name, fails the build: a broken reference never passes silently. (MkDocs puts this
folder on the path while it loads the hook: the generators are imported from beside it.)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TYPE_CHECKING

from docs_cli import cli_reference
from docs_job_file import job_file_reference
from mkdocs.exceptions import PluginError

if TYPE_CHECKING:
    from mkdocs.config.defaults import MkDocsConfig
    from mkdocs.structure.files import Files
    from mkdocs.structure.pages import Page

GENERATORS: dict[str, Callable[[], str]] = {
    "job-file": job_file_reference,
    "cli": cli_reference,
}
MARKER = re.compile(r"^<!-- generated: (?P<name>[a-z-]+) -->[ \t]*$", re.MULTILINE)
_used: set[str] = set()  # the generators this build has run


def on_pre_build(config: MkDocsConfig) -> None:
    _used.clear()


def on_post_build(config: MkDocsConfig) -> None:
    """Every generator ran: a reference page that lost its marker fails the build too."""
    unused = sorted(set(GENERATORS) - _used)
    if unused:
        raise PluginError(f"no page holds the marker of {', '.join(unused)}")


def on_page_markdown(markdown: str, *, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Replace each marker line of the page by its generated Markdown."""

    def generate(match: re.Match[str]) -> str:
        name = match["name"]
        generator = GENERATORS.get(name)
        where = f"{page.file.src_uri}: <!-- generated: {name} -->"
        if generator is None:
            raise PluginError(f"{where}: no such generator (known: {', '.join(GENERATORS)})")
        try:
            text = generator()
        except Exception as exc:
            raise PluginError(f"{where}: generation failed: {type(exc).__name__}: {exc}") from exc
        if not text.strip():
            raise PluginError(f"{where}: generation produced nothing")
        _used.add(name)
        return text

    markdown = MARKER.sub(generate, markdown)
    if "<!-- generated" in markdown:  # a marker not on a line of its own, or misspelt
        raise PluginError(f"{page.file.src_uri}: a '<!-- generated' line that is no marker")
    return markdown
