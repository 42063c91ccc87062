"""Built-in worker programs, found by name."""

from __future__ import annotations

from scaletune.algorithms._base import Algorithm, PreparedData
from scaletune.spec import AlgorithmName

__all__ = ["Algorithm", "PreparedData", "get_algorithm"]


def get_algorithm(name: AlgorithmName) -> Algorithm:
    if name is AlgorithmName.XGBOOST:
        from scaletune.algorithms.xgboost import XGBoostAlgorithm

        return XGBoostAlgorithm()
    if name is AlgorithmName.DNN:
        from scaletune.algorithms.dnn import DNNAlgorithm

        return DNNAlgorithm()
    if name is AlgorithmName.SCRIPT:
        from scaletune.algorithms.script import ScriptAlgorithm

        return ScriptAlgorithm()
    raise AssertionError(f"no algorithm registered for {name!r}")  # the enum is exhaustive
