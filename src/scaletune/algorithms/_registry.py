"""Algorithms by name: the built-ins, and those packages add through the `scaletune.algorithms`
entry-point group (`name = "package.module:AlgorithmClass"`), found when a job names one."""

from __future__ import annotations

import importlib
from importlib.metadata import EntryPoint, entry_points

from scaletune.algorithms._base import Algorithm
from scaletune.errors import InvalidInputError

ENTRY_POINT_GROUP = "scaletune.algorithms"
# Imported only when a job names one: each brings its own library (xgboost, torch, lightgbm).
BUILT_IN = {
    "xgboost": "scaletune.algorithms.xgboost:XGBoostAlgorithm",
    "dnn": "scaletune.algorithms.dnn:DNNAlgorithm",
    "lightgbm": "scaletune.algorithms.lightgbm:LightGBMAlgorithm",
    "script": "scaletune.algorithms.script:ScriptAlgorithm",
}


def get_algorithm(name: str) -> Algorithm:
    """The algorithm a job names: a built-in, else an installed plug-in's."""
    if name in BUILT_IN:
        module, _, attribute = BUILT_IN[name].partition(":")
        found: object = getattr(importlib.import_module(module), attribute)
    else:
        plugin = _plugins().get(name)
        if plugin is None:
            raise InvalidInputError(
                f"algorithm {name!r}: not a built-in ({', '.join(BUILT_IN)}) nor one an "
                f"installed package adds through the {ENTRY_POINT_GROUP!r} entry points"
                + (f" ({', '.join(sorted(_plugins()))})" if _plugins() else "")
            )
        try:
            found = plugin.load()
        except Exception as exc:  # a broken plug-in: named, not a traceback
            raise InvalidInputError(
                f"algorithm {name!r}: its entry point {plugin.value!r} does not load: "
                f"{type(exc).__name__}: {exc}"
            ) from None
    if not (isinstance(found, type) and issubclass(found, Algorithm)):
        raise InvalidInputError(f"algorithm {name!r}: {found!r} is not an Algorithm subclass")
    if found.name != name:
        raise InvalidInputError(f"algorithm {name!r}: its class calls itself {found.name!r}")
    return found()


def algorithm_names() -> list[str]:
    """Every name a job may give: the built-ins, then the plug-ins installed."""
    return [*BUILT_IN, *sorted(set(_plugins()) - set(BUILT_IN))]


def _plugins() -> dict[str, EntryPoint]:
    return {entry.name: entry for entry in entry_points(group=ENTRY_POINT_GROUP)}
