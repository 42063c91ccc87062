"""Packages whose names load on first use (PEP 562), so that importing one part of a package
does not import all of it: `scaletune jobs list` needs the store's records, not the tuner.

A lazy package says where each name lives once: in its `if TYPE_CHECKING:` block, as
`from module import name` statements, which type checkers read as they are and which
`lazy_names` reads as its table (so the two cannot disagree). `__all__` lists them again."""

from __future__ import annotations

import ast
import importlib
from collections.abc import Callable
from typing import Any


def lazy_names(package: str) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: each name its TYPE_CHECKING block imports is
    imported from that module the first time it is asked for."""
    namespace = importlib.import_module(package).__dict__
    where = declared_names(namespace["__loader__"].get_source(package))

    def load(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value  # later lookups skip this function
        return value

    return load


def declared_names(source: str) -> dict[str, str]:
    """Each name a module's top-level `if TYPE_CHECKING:` block imports, and the module it
    comes from (absolute `from module import name` statements only)."""
    where: dict[str, str] = {}
    for node in ast.parse(source).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for statement in node.body:
                if not isinstance(statement, ast.ImportFrom) or statement.level:
                    raise ValueError(f"not an absolute from-import: {ast.unparse(statement)}")
                for alias in statement.names:
                    where[alias.asname or alias.name] = statement.module or ""
    return where
