"""Algorithms, found by name: the built-ins and those installed packages add."""

from __future__ import annotations

from scaletune.algorithms._base import Algorithm, PreparedData
from scaletune.algorithms._registry import ENTRY_POINT_GROUP, algorithm_names, get_algorithm

__all__ = ["ENTRY_POINT_GROUP", "Algorithm", "PreparedData", "algorithm_names", "get_algorithm"]
