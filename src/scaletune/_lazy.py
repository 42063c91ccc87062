"""Packages whose names load on first use (PEP 562), so that importing one part of a package
does not import all of it: `scaletune jobs list` needs the store's records, not the tuner."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_names(package: str, where: Mapping[str, str]) -> Callable[[str], Any]:
    """A module `__getattr__` for `package`: each name in `where` is imported from the
    submodule given (relative to `package`) the first time it is asked for."""
    namespace = importlib.import_module(package).__dict__

    def load(name: str) -> Any:
        module = where.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        namespace[name] = value  # later lookups skip this function
        return value

    return load
