"""Command summaries for `--help` listings, one paragraph each.

Typer lists a command by its docstring's first paragraph but, in its rich mode, keeps the
docstring's line breaks there: a summary broke where its source line ended, not where the
terminal does. Each command is given that paragraph as one line, for the terminal to wrap."""

from __future__ import annotations

import inspect

import typer


def summarise_commands(app: typer.Typer) -> None:
    """Set each command's short help (of `app` and the groups under it) to its docstring's
    first paragraph on one line, where it has none of its own."""
    for command in app.registered_commands:
        if command.short_help is None and command.callback is not None:
            command.short_help = first_paragraph(command.help or command.callback.__doc__)
    for group in app.registered_groups:
        if group.typer_instance is not None:
            summarise_commands(group.typer_instance)


def first_paragraph(text: str | None) -> str | None:
    if not text:
        return None
    return " ".join(inspect.cleandoc(text).split("\n\n")[0].split())
