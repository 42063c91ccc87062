"""No import cycles among scaletune's modules, counting imports deferred inside functions
(those under `if TYPE_CHECKING:` never run and are left out). A module's own packages are left
out too: Python runs a package's `__init__` before any module in it, whatever imports what."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[1] / "src"


def _name(path: Path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(path: Path, modules: set[str]) -> set[str]:
    """The project modules `path` imports, at its top or inside functions."""
    name = _name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for statement in node.orelse:
                visit(statement)
            return
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                source = ".".join([*base, *([node.module] if node.module else [])])
            else:
                source = node.module or ""
            found.add(source)  # and each name, where it is a module of its own
            found.update(f"{source}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    ancestors = {".".join(name.split(".")[:depth]) for depth in range(1, name.count(".") + 1)}
    return {module for module in found & modules if module != name and module not in ancestors}


def test_no_module_imports_itself_through_others() -> None:
    paths = {_name(path): path for path in SOURCE.rglob("*.py")}
    graph = {name: _imported(path, set(paths)) for name, path in paths.items()}
    assert "scaletune.cluster._backend" in graph["scaletune.cluster._local"]  # sees imports
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        raise AssertionError(f"an import cycle: {' -> '.join(error.args[1])}") from None
