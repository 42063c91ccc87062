"""Everything that differs between algorithms is the `Algorithm` interface's: no code outside
`algorithms/` asks which algorithm a job runs, and a package adds one through an entry point."""

from __future__ import annotations

import ast
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from scaletune.algorithms import ENTRY_POINT_GROUP, algorithm_names, get_algorithm
from scaletune.algorithms._registry import BUILT_IN
from scaletune.errors import InvalidInputError
from scaletune.spec import AlgorithmName, training_spec_from_dict
from tests.conftest import pooled

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "scaletune"
NAMES = {name.value for name in AlgorithmName}


def _asks_which_algorithm(node: ast.AST) -> bool:
    """A comparison of something named `algorithm` with a built-in's name, or any use of a
    member of AlgorithmName (`AlgorithmName.DNN`)."""
    if isinstance(node, ast.Attribute) and ast.unparse(node.value) == "AlgorithmName":
        return True
    if not isinstance(node, ast.Compare):
        return False
    sides = [node.left, *node.comparators]
    named = any("algorithm" in ast.unparse(side).lower() for side in sides)
    return named and any(_a_name(side) for side in sides)


def _a_name(node: ast.AST) -> bool:
    """A built-in's name: a literal, AlgorithmName's member, or a collection of them."""
    if isinstance(node, ast.Tuple | ast.List | ast.Set):
        return any(_a_name(element) for element in node.elts)
    if isinstance(node, ast.Attribute):
        return ast.unparse(node.value) == "AlgorithmName"
    return isinstance(node, ast.Constant) and node.value in NAMES


def test_no_code_outside_algorithms_compares_an_algorithms_name() -> None:
    found = [
        f"{path.relative_to(PACKAGE)}: {ast.unparse(node)}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if "algorithms" not in path.relative_to(PACKAGE).parts
        for node in ast.walk(ast.parse(path.read_text()))
        if _asks_which_algorithm(node)
    ]
    assert found == []
    # The check sees what it looks for.
    assert _asks_which_algorithm(ast.parse('spec.algorithm == "dnn"').body[0].value)  # type: ignore[attr-defined]
    assert _asks_which_algorithm(ast.parse("x is AlgorithmName.XGBOOST").body[0].value)  # type: ignore[attr-defined]


def test_every_built_in_is_found_by_its_name() -> None:
    assert set(BUILT_IN) == NAMES
    for name in NAMES:
        assert get_algorithm(name).name == name
    assert algorithm_names()[: len(BUILT_IN)] == list(BUILT_IN)


PLUGIN = """
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from scaletune.algorithms import Algorithm


class ConstantHyperparameters(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    rounds: int = 3


def predict_the_mean(ctx):
    table = ctx.channel("train")
    for step in range(1, ctx.task.hyperparameters.rounds + 1):
        ctx.report(step, **{"train:mean": float(table.labels.mean())})


class ConstantAlgorithm(Algorithm):
    name: ClassVar[str] = "constant"
    hyperparameters_type: ClassVar[type[BaseModel]] = ConstantHyperparameters
    step_name: ClassVar[str] = "round"

    @property
    def program(self):
        return predict_the_mean
"""


@pytest.fixture
def installed_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A real distribution on sys.path: its module and a dist-info with entry_points.txt."""
    (tmp_path / "scaletune_constant.py").write_text(textwrap.dedent(PLUGIN))
    info = tmp_path / "scaletune_constant-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: scaletune-constant\nVersion: 1.0\n"
    )
    (info / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nconstant = scaletune_constant:ConstantAlgorithm\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))  # the job's worker processes too
    yield tmp_path
    sys.modules.pop("scaletune_constant", None)


def test_a_package_adds_an_algorithm_through_its_entry_point(
    installed_plugin: Path, store_path: Path
) -> None:
    from scaletune.api import Session
    from scaletune.cluster import LocalBackend
    from scaletune.store import JobStatus

    assert "constant" in algorithm_names()
    spec = training_spec_from_dict(
        {
            "algorithm": "constant",
            "instance_count": 2,
            "hyperparameters": {"rounds": 4},
            "channels": {"train": {"dataset": "breast-cancer"}},
        }
    )
    # Workers of their own, started once the package is on the path, as a user's would be.
    with pooled(LocalBackend()) as backend, Session(store_path, backend=backend) as session:
        record = session.controller.run(session.controller.prepare(spec))
        assert record.status is JobStatus.COMPLETED, record.failure_reason
        steps = [p.step for p in session.store.metrics(record.id, "train:mean")]
    assert steps == [1, 2, 3, 4]
    with pytest.raises(InvalidInputError, match=r"hyperparameters.depth"):
        training_spec_from_dict({**spec.model_dump(), "hyperparameters": {"depth": 1}})


def test_an_unknown_algorithm_is_one_line_naming_it() -> None:
    with pytest.raises(InvalidInputError, match=r"^algorithm 'catboost': not a built-in"):
        get_algorithm("catboost")
