"""How numbers, times and statuses read on scaletune's pages (Jinja2 filters and tests)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

NONE = "\u2013"  # an en dash: no value


def seconds(value: float | None) -> str:
    if value is None:
        return NONE
    if value < 120:
        return f"{value:.1f} s"
    if value < 7200:
        return f"{value / 60:.1f} min"
    return f"{value / 3600:.2f} h"


def number(value: float | int | None, digits: int = 4) -> str:
    if value is None:
        return NONE
    if isinstance(value, int):
        return f"{value:,}"
    if not math.isfinite(value):
        return str(value)
    return f"{value:.{digits}g}"


def stamp(value: float | None) -> str:
    if value is None:
        return NONE
    return datetime.fromtimestamp(value, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def iso(value: float | None) -> str:
    return "" if value is None else datetime.fromtimestamp(value, UTC).isoformat()


def pretty_json(value: Any) -> str:
    return json.dumps(value, indent=2, sort_keys=True, default=str)


def setting(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


_NUMERIC = re.compile(r"[-+]?[\d,]*\.?\d+(?:e[-+]?\d+)?(?: ?(?:%|s|\u00d7|min|h))?")


def numeric_text(value: Any) -> bool:
    """Whether a table cell reads as a figure (right-aligned, tabular digits)."""
    return isinstance(value, str) and _NUMERIC.fullmatch(value.strip()) is not None


TESTS: dict[str, Callable[..., bool]] = {"numeric_text": numeric_text}

FILTERS: dict[str, Callable[..., str]] = {
    "seconds": seconds,
    "number": number,
    "stamp": stamp,
    "iso": iso,
    "pretty_json": pretty_json,
    "setting": setting,
}
