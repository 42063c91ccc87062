"""No import cycles among scaletune's modules, counting every import: deferred ones inside
functions and those under `if TYPE_CHECKING:` (a type checker follows them; a cycle there is
one the next runtime import closes). A name from a lazy package counts as an import of the
module its table names (`scaletune._lazy`), as Python runs it; a lazy package's own table is
no import. A module's own packages are left out: Python runs a package's `__init__` before
any module in it, whatever imports what."""

from __future__ import annotations

import ast
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

from scaletune._lazy import declared_names

SOURCE = Path(__file__).resolve().parents[1] / "src"


def _name(path: Path) -> str:
    parts = path.relative_to(SOURCE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _lazy_tables(paths: dict[str, Path]) -> dict[str, dict[str, str]]:
    """Each lazy package's names and the modules they load from."""
    return {
        name: declared_names(path.read_text())
        for name, path in paths.items()
        if path.name == "__init__.py" and "lazy_names(__name__)" in path.read_text()
    }


def _imported(path: Path, modules: set[str], lazy: dict[str, dict[str, str]]) -> set[str]:
    """The project modules `path` imports, at its top, inside functions or for type checks."""
    name = _name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        checking = isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        if checking and name in lazy:  # a lazy package's table: loaded on first use
            for statement in node.orelse:  # type: ignore[attr-defined]
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
            table = lazy.get(source, {})
            for alias in node.names:
                if f"{source}.{alias.name}" in modules:  # a module of its own
                    found.add(f"{source}.{alias.name}")
                else:  # a name: where the lazy table loads it from, else the module itself
                    found.add(table.get(alias.name, source))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    ancestors = {".".join(name.split(".")[:depth]) for depth in range(1, name.count(".") + 1)}
    return {module for module in found & modules if module != name and module not in ancestors}


def _graph() -> dict[str, set[str]]:
    paths = {_name(path): path for path in SOURCE.rglob("*.py")}
    lazy = _lazy_tables(paths)
    return {name: _imported(path, set(paths), lazy) for name, path in paths.items()}


def test_no_module_imports_itself_through_others() -> None:
    graph = _graph()
    assert "scaletune.cluster._backend" in graph["scaletune.cluster._local"]  # sees imports
    # ... through a lazy package's table, and under TYPE_CHECKING
    assert "scaletune.spec._training" in graph["scaletune.algorithms.xgboost"]
    assert "scaletune.spec._tuning" in graph["scaletune.algorithms._base"]
    try:
        TopologicalSorter(graph).prepare()
    except CycleError as error:
        raise AssertionError(f"an import cycle: {' -> '.join(error.args[1])}") from None


def test_a_lazy_package_lists_each_name_in_its_table_and_all() -> None:
    """Its TYPE_CHECKING block is the table; `__all__` exports the same names."""
    for package, table in _lazy_tables({_name(p): p for p in SOURCE.rglob("*.py")}).items():
        module = __import__(package, fromlist=["__all__"])
        # (scaletune's script helpers, from `reporting`, are imported eagerly: no table)
        eager = {"__version__", "checkpoint", "report", "StopRequest", "stop_goes_on"}
        exported = set(module.__all__) - (eager if package == "scaletune" else set())
        assert exported == set(table), package
        for name in table:
            assert getattr(module, name) is not None
