"""The two controllers stay in parts: no class in `tuning/` or `training/` grows past 250
lines (a loop that takes on every special case shows here first)."""

from __future__ import annotations

import ast
from pathlib import Path

import scaletune

MOST_LINES = 250
PACKAGES = ("tuning", "training")


def _classes(root: Path) -> list[tuple[str, int]]:
    found = []
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                found.append((f"{path.relative_to(root.parent)}:{node.name}", lines))
    return found


def test_no_class_in_the_controllers_packages_is_over_250_lines() -> None:
    source = Path(scaletune.__file__).parent
    classes = [entry for package in PACKAGES for entry in _classes(source / package)]
    assert len(classes) > 20  # it found them
    too_long = [f"{name} ({lines} lines)" for name, lines in classes if lines > MOST_LINES]
    assert too_long == []
