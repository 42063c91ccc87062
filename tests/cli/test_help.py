"""`--help` listings: each command's summary is one paragraph for the terminal to wrap, not
broken where its docstring's source lines end."""

from __future__ import annotations

import re

import pytest
import typer
from typer.testing import CliRunner

from scaletune.cli import app
from scaletune.cli._help import first_paragraph

GROUPS: list[tuple[list[str], typer.Typer]] = [([], app)] + [
    ([group.name or ""], group.typer_instance)
    for group in app.registered_groups
    if group.typer_instance is not None
]


def _rows(words: list[str], columns: int) -> dict[str, list[str]]:
    """The Commands panel of `scaletune WORDS --help` at this width: each command's rows."""
    shown = CliRunner().invoke(app, [*words, "--help"], env={"COLUMNS": str(columns)})
    assert shown.exit_code == 0, shown.output
    rows: dict[str, list[str]] = {}
    name = ""
    for line in shown.output.split("Commands")[1].splitlines()[1:]:
        cells = re.match(r"│ (\S*)\s+(.*?)\s*│$", line)
        if cells is not None:
            name = cells[1] or name  # a continuation row has no name
            rows.setdefault(name, []).append(cells[2])
    return rows


@pytest.mark.parametrize(
    ("words", "group"), GROUPS, ids=[" ".join(["scaletune", *words]) for words, _ in GROUPS]
)
def test_each_command_summary_is_one_paragraph_wrapped_by_the_terminal(
    words: list[str], group: typer.Typer
) -> None:
    wide, narrow = _rows(words, 400), _rows(words, 80)
    for command in group.registered_commands:
        assert command.callback is not None
        name = command.name or command.callback.__name__.replace("_", "-")
        summary = first_paragraph(command.callback.__doc__) or ""
        # Wide enough for any summary: one row, the docstring's first paragraph.
        assert wide[name] == [summary], wide
        # Narrow: wrapped at the panel's edge, the same words in the same order.
        assert " ".join(narrow[name]).split() == summary.split(), narrow
