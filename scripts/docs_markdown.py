"""Markdown pieces the generated reference pages share: table cells, code spans, tables."""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence

_CODE_SPAN = re.compile(r"(`+)(.+?)\1", re.DOTALL)


def text(value: str) -> str:
    """Prose for a table cell: one line, `|` and `<` escaped outside code spans."""
    out, start = [], 0
    for match in _CODE_SPAN.finditer(value):
        out.append(escape(value[start : match.start()]))
        out.append(match.group(0))
        start = match.end()
    out.append(escape(value[start:]))
    return " ".join("".join(out).split())


def escape(value: str) -> str:
    return value.replace("&", "&amp;").replace("<", "&lt;").replace("|", "\\|")


def code(value: str) -> str:
    """A code span that holds any text (backticks included)."""
    fence = "``" if "`" in value else "`"
    pad = " " if value.startswith("`") or value.endswith("`") else ""
    return f"{fence}{pad}{value}{pad}{fence}"


def table(header: tuple[str, ...], rows: Sequence[tuple[str, ...]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell or " " for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def paragraphs(doc: str | None) -> str:
    """A docstring as Markdown paragraphs (its lines rejoined)."""
    if not doc:
        return ""
    blocks = re.split(r"\n\s*\n", inspect.cleandoc(doc))
    return "\n\n".join(text(block) for block in blocks if block.strip())


# --- The job file reference -------------------------------------------------------------
