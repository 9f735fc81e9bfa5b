"""Size and import-structure numbers of ``src/anpred`` (issue 40's before/after).

Reads the source with :mod:`ast` only (nothing is imported), so it runs in any Python::

    python benchmarks/architecture_stats.py            # the numbers, as text
    python benchmarks/architecture_stats.py --json     # the same, as JSON

It prints the ten longest functions, the length of ``pipeline/run.py`` and of the longest
modules, the count of imports of anpred made inside a function body, and the import cycles
between packages (strongly connected components of the package graph), once counting every
import and once counting module-level imports only. ``tests/test_architecture.py`` builds
its graph with :func:`import_edges` from here.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "anpred"


@dataclass(frozen=True)
class ImportEdge:
    """One import of an anpred module by another.

    Attributes:
        source: The importing module (``anpred.pipeline.run``).
        target: The imported module, as written (``anpred.execution.pool``).
        line: The line of the import statement.
        in_function: Whether the import sits inside a function body.
        type_only: Whether it sits under ``if TYPE_CHECKING:`` (never executed).
    """

    source: str
    target: str
    line: int
    in_function: bool
    type_only: bool


def module_name(path: Path, src: Path = SRC) -> str:
    """The dotted name of the module in ``path``."""
    parts = list(path.relative_to(src.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def package_of(module: str) -> str:
    """The package a module belongs to: ``anpred.<first part>`` (a top-level module is its own)."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _modules(src: Path) -> list[Path]:
    return sorted(p for p in src.rglob("*.py") if "__pycache__" not in p.parts)


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join(base + ([node.module] if node.module else []))


def _is_module(name: str, src: Path) -> bool:
    path = src.parent.joinpath(*name.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def _targets(
    node: ast.Import | ast.ImportFrom, module: str, is_package: bool, src: Path
) -> list[str]:
    if isinstance(node, ast.Import):
        return [a.name for a in node.names]
    target = _resolve(node, module, is_package)
    # ``from anpred import cache``, ``from anpred.store import files``: a name may be a module
    named = [f"{target}.{a.name}" for a in node.names]
    return [n if _is_module(n, src) else target for n in named]


def _file_edges(path: Path, src: Path) -> list[ImportEdge]:
    module = module_name(path, src)
    is_package = path.name == "__init__.py"
    edges: list[ImportEdge] = []
    todo: list[tuple[ast.AST, bool, bool]] = [(ast.parse(path.read_text()), False, False)]
    while todo:
        node, in_function, type_only = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                for target in sorted(set(_targets(child, module, is_package, src))):
                    if target == "anpred" or target.startswith("anpred."):
                        edges.append(
                            ImportEdge(module, target, child.lineno, in_function, type_only)
                        )
            inner = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            typed = type_only or (isinstance(child, ast.If) and _is_type_checking(child))
            todo.append((child, inner, typed))
    return sorted(edges, key=lambda e: (e.line, e.target))


def import_edges(src: Path = SRC) -> list[ImportEdge]:
    """Every import of anpred inside ``src``, module level and inside functions alike."""
    return [edge for path in _modules(src) for edge in _file_edges(path, src)]


def package_graph(edges: list[ImportEdge]) -> dict[str, set[str]]:
    """Package → the other packages it imports from."""
    graph: dict[str, set[str]] = {}
    for edge in edges:
        a, b = package_of(edge.source), package_of(edge.target)
        graph.setdefault(a, set())
        graph.setdefault(b, set())
        if a != b and b != "anpred":
            graph[a].add(b)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(found)


def _function_sizes(path: Path, src: Path) -> list[tuple[int, str]]:
    module = module_name(path, src)
    sizes: list[tuple[int, str]] = []
    todo: list[tuple[ast.AST, str]] = [(ast.parse(path.read_text()), "")]
    while todo:
        node, prefix = todo.pop()
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    sizes.append((lines, f"{module}:{name}"))
                todo.append((child, f"{name}."))
    return sizes


def longest_functions(src: Path = SRC, count: int = 10) -> list[tuple[int, str]]:
    """The ``count`` longest functions and methods as (lines, ``module:qualified name``)."""
    sizes = [size for path in _modules(src) for size in _function_sizes(path, src)]
    return sorted(sizes, key=lambda s: (-s[0], s[1]))[:count]


def stats(src: Path = SRC) -> dict[str, object]:
    """Every number this script prints, as one JSON-able record."""
    edges = import_edges(src)
    executed = [e for e in edges if not e.type_only]
    module_level = [e for e in executed if not e.in_function]
    lines = {module_name(p, src): len(p.read_text().splitlines()) for p in _modules(src)}
    run_py = src / "pipeline" / "run.py"
    return {
        "longest_functions": [[n, name] for n, name in longest_functions(src)],
        "run_py_lines": len(run_py.read_text().splitlines()) if run_py.exists() else 0,
        "longest_modules": sorted(([n, m] for m, n in lines.items()), reverse=True)[:10],
        "modules_over_400_lines": sum(1 for n in lines.values() if n > 400),
        # import statements (one ``from anpred.x import a, b`` is one), not names
        "function_level_internal_imports": len(
            {(e.source, e.line) for e in executed if e.in_function}
        ),
        "package_cycles_all_imports": cycles(package_graph(executed)),
        "package_cycles_module_level": cycles(package_graph(module_level)),
    }


def main(argv: list[str] | None = None) -> None:
    """Print the numbers."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print JSON")
    args = parser.parse_args(argv)
    record = stats()
    if args.json:
        print(json.dumps(record, indent=1))
        return
    print("longest functions (lines):")
    for n, name in record["longest_functions"]:  # type: ignore[union-attr]
        print(f"  {n:4d}  {name}")
    print(f"pipeline/run.py: {record['run_py_lines']} lines")
    print(f"modules over 400 lines: {record['modules_over_400_lines']}")
    print(f"function-level imports of anpred: {record['function_level_internal_imports']}")
    for key in ("package_cycles_all_imports", "package_cycles_module_level"):
        found = record[key]
        sizes = [len(c) for c in found]  # type: ignore[union-attr]
        print(f"{key}: {len(sizes)} cycle(s), sizes {sizes}")
        for component in found:  # type: ignore[union-attr]
            print("   ", " ".join(p.removeprefix("anpred.") for p in component))


if __name__ == "__main__":
    main()
