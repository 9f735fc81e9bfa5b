"""The layers of ``src/anpred`` (docs/architecture.md): imports go downward, no cycles.

The import graph counts every import of anpred, inside functions too (an import hidden
in a function is still a dependency); only ``if TYPE_CHECKING:`` imports, which never
run, are left out. The layer order is the block in docs/architecture.md, read here.
"""

from __future__ import annotations

import re
import sys
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from architecture_stats import (  # noqa: E402
    ImportEdge,
    cycles,
    import_edges,
    package_graph,
    package_of,
)

#: Imports from a lower layer into a higher one that exist today, each with its reason and
#: its way out; ``(importing package, imported package)``. The test fails on a new one; one
#: fixed goes from this list in the same change (several people commit to this tree at
#: once, so a listed import that is not there yet or no more does not fail the test).
KNOWN: dict[tuple[str, str], str] = {}

#: Package cycles (inside one layer) that exist today, as sorted package names.
KNOWN_CYCLES: list[list[str]] = [
    # interchange.export builds zoo models; zoo.weights reads bundled images (inputs);
    # inputs.several packs inputs by the interchange's packing record
    ["inputs", "interchange", "store", "zoo"],
]


def _layers() -> dict[str, int]:
    """Package → layer index, from the ``layers`` block of docs/architecture.md."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    block = re.search(r"<!-- layers:.*?-->\s*```text\n(.*?)```", text, re.S)
    assert block, "docs/architecture.md has no layers block"
    layers: dict[str, int] = {}
    for index, line in enumerate(block.group(1).strip().splitlines()):
        for name in line.split(":", 1)[1].split():
            assert name not in layers, f"{name} is in two layers"
            layers[name] = index
    return layers


def _short(package: str) -> str:
    return package.removeprefix("anpred.") if package != "anpred" else "anpred"


@cache
def _all_edges() -> tuple[ImportEdge, ...]:
    return tuple(import_edges())


def _edges() -> list[ImportEdge]:
    return [e for e in _all_edges() if not e.type_only]


def test_every_package_has_a_layer() -> None:
    layers = _layers()
    src = ROOT / "src" / "anpred"
    packages = {p.stem for p in src.iterdir() if p.suffix == ".py" or (p / "__init__.py").exists()}
    packages = {"anpred" if p == "__init__" else p for p in packages}
    missing = sorted(packages - set(layers))
    assert not missing, f"packages without a layer in docs/architecture.md: {missing}"


def test_no_import_goes_up_a_layer() -> None:
    layers = _layers()
    upward: dict[tuple[str, str], list[str]] = {}
    for edge in _edges():
        source, target = _short(package_of(edge.source)), _short(package_of(edge.target))
        if target == "anpred" or source == target or target not in layers:
            continue
        if layers.get(source, len(layers)) < layers[target]:
            where = f"{edge.source}:{edge.line} imports {edge.target}"
            upward.setdefault((source, target), []).append(where)
    new = {k: v for k, v in upward.items() if k not in KNOWN}
    assert not new, "imports from a lower layer into a higher one:\n" + "\n".join(
        line for lines in new.values() for line in lines
    )


def test_no_cycle_between_packages() -> None:
    # the upward imports KNOWN tolerates close cycles that the test above names already
    edges = [
        e for e in _edges()
        if (_short(package_of(e.source)), _short(package_of(e.target))) not in KNOWN
    ]  # fmt: skip
    found = [[_short(p) for p in c] for c in cycles(package_graph(edges))]
    new = [c for c in found if c not in KNOWN_CYCLES]
    assert not new, f"import cycles between packages: {new}"


def test_the_graph_sees_imports_inside_functions() -> None:
    # the graph is only as good as its walk: a known function-level import must be in it
    inner = [e for e in _edges() if e.in_function]
    assert inner, "no function-level import found: the walk misses function bodies"
    assert all(e.source.startswith("anpred") for e in inner)
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
