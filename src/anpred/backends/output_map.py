"""Map a converted artifact's raw outputs back to anchors, by a recorded rule.

Converters rename outputs (``Identity_3``, ``out4``, ``fetch_name_2``), may reorder them,
return them channels-last (onnx2tf: NHWC) or without the batch dimension (ncnn: CHW). The
mapping is decided once, on the first inference, by the first rule that decides it:

1. **order**: as many outputs as anchors, and each output's shape fits the anchor at its
   position in some layout: output *i* is anchor *i*;
2. **shape**: otherwise each anchor takes the one output whose shape fits it (outputs that
   fit several anchors are settled by elimination);
3. **values**: anchors that the shapes cannot tell apart take the output closest (relative
   L2) to the reference's values for that anchor (the fp64 reference's capture, when the
   worker has one); without reference values they keep their relative order, and the
   record says so.

A shape "fits" in a layout: the graph's own (``NCHW``), channels-last (``NHWC``), batch
dimension dropped (``CHW``), or both (``HWC``); letters follow the rank (``NCW``,
``NC``...); failing those, extra or missing unit dimensions (``unit dims``: reshaped).
When one output fits in several layouts (a square tensor), the layout the converter is
documented to give that rank decides (the runner's ``known_layouts``), else the layout the
other outputs of that rank came back in, then values, else the graph's layout (recorded as
assumed). The rule, each anchor's output and layout, and how each was decided, are recorded
(:meth:`OutputMap.to_dict`) in the participant's conversion record; mapped arrays are
returned in the graph's layout (NCHW) so that analysis aligns them like any capture.
Pure NumPy: no library is imported.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

#: Rules, in the order they are tried (a map's rule is the last one it needed).
RULES = ("order", "shape", "values", "relative order")


class OutputMapError(ValueError):
    """The artifact's outputs cannot be mapped to the anchors (one line)."""


def _letters(rank: int) -> str:
    """Graph-layout letters of a rank: ``NC`` + spatial (``NCHW`` for 4-D)."""
    spatial = rank - 2
    if rank < 2:
        return "N"[:rank] or "S"
    if spatial <= 3:
        return "NC" + "DHW"[3 - spatial :]
    return "NC" + "".join(f"X{i}" for i in range(spatial))


def layouts_of(rank: int) -> list[str]:
    """The layouts an output of an anchor of ``rank`` may come back in, graph layout first."""
    graph = _letters(rank)
    found = [graph]
    if rank >= 3:
        found.append(graph[0] + graph[2:] + graph[1])
    if rank >= 2:
        found += [f[1:] for f in list(found)]
    return found


def _transform(shape: Sequence[int], layout: str, rank: int) -> tuple[int, ...]:
    """The graph-layout shape ``shape`` stands for when it is in ``layout``."""
    shape = tuple(shape)
    graph = _letters(rank)
    if len(layout) < len(graph):  # batch dropped
        shape = (1, *shape)
        layout = graph[0] + layout
    if layout != graph:  # channels last
        shape = (shape[0], shape[-1], *shape[1:-1])
    return shape


#: The layout of an output that differs from its anchor only by unit dimensions (MNN
#: returns a Gemm's (1, 1280) as (1, 1280, 1, 1)); it is reshaped back.
UNIT_DIMS = "unit dims"


def _squeezed(shape: Sequence[int]) -> tuple[int, ...]:
    return tuple(d for d in shape if d != 1)


def fits(raw_shape: Sequence[int], anchor_shape: Sequence[int]) -> list[str]:
    """Layouts in which an output of ``raw_shape`` is an anchor of ``anchor_shape``."""
    found = _fits(raw_shape, anchor_shape)
    if not found and tuple(raw_shape) != tuple(anchor_shape):
        if _squeezed(raw_shape) == _squeezed(anchor_shape):
            found.append(UNIT_DIMS)
    return found


def _fits(raw_shape: Sequence[int], anchor_shape: Sequence[int]) -> list[str]:
    rank = len(anchor_shape)
    found = []
    for layout in layouts_of(rank):
        if len(layout) != len(raw_shape) and not (rank < 2 and len(raw_shape) == rank):
            continue
        if len(layout) < rank and anchor_shape[0] != 1:
            continue
        if _transform(raw_shape, layout, rank) == tuple(anchor_shape):
            found.append(layout)
    return found


def to_graph_layout(array: np.ndarray, layout: str, shape: Sequence[int]) -> np.ndarray:
    """``array`` (in ``layout``) in the graph's layout of an anchor of ``shape``."""
    if layout == UNIT_DIMS:
        return np.ascontiguousarray(array.reshape(tuple(shape)))
    rank = len(shape)
    graph = _letters(rank)
    if len(layout) < len(graph):
        array = array[np.newaxis]
        layout = graph[0] + layout
    if layout != graph:
        array = np.moveaxis(array, -1, 1)
    return np.ascontiguousarray(array)


def _rel_l2(a: np.ndarray, b: np.ndarray) -> float:
    a64, b64 = a.astype(np.float64).ravel(), b.astype(np.float64).ravel()
    return float(np.linalg.norm(a64 - b64) / max(np.linalg.norm(b64), 1e-30))


@dataclass(frozen=True)
class Entry:
    """Where one anchor is among the raw outputs.

    Attributes:
        anchor: Anchor key.
        index: Position of its output in the artifact's output order.
        name: That output's name in the artifact (``""`` when the runtime has none).
        layout: The layout the output came back in.
        decided_by: The rule that matched it (:data:`RULES`).
        layout_by: How the layout was chosen (``"shape"``: the only fit; ``"other outputs"``;
            ``"values"``; ``"assumed"``).
    """

    anchor: str
    index: int
    name: str
    layout: str
    decided_by: str
    layout_by: str


@dataclass
class OutputMap:
    """The decided mapping of raw outputs to anchors (see the module docstring)."""

    entries: list[Entry]
    rule: str
    raw_shapes: list[tuple[int, ...]]
    unused: list[int] = field(default_factory=list)

    def apply(self, raw: Sequence[np.ndarray], shapes: Mapping[str, Sequence[int]]) -> dict:
        """Anchor key → array in the graph's layout.

        Raises:
            OutputMapError: The outputs' shapes changed since the map was decided.
        """
        got = [tuple(np.shape(r)) for r in raw]
        if got != self.raw_shapes:
            raise OutputMapError(
                f"the artifact's output shapes changed from {self.raw_shapes} to {got}"
            )
        return {
            e.anchor: to_graph_layout(np.asarray(raw[e.index]), e.layout, shapes[e.anchor])
            for e in self.entries
        }

    def layouts(self) -> dict[str, str]:
        """Anchor key → the layout its output came back in."""
        return {e.anchor: e.layout for e in self.entries}

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready record."""
        return {
            "rule": self.rule,
            "outputs": [
                {**e.__dict__, "shape": list(self.raw_shapes[e.index])} for e in self.entries
            ],
            "unused_outputs": self.unused,
            "returned_layout": "graph (NCHW)",
        }


def map_outputs(
    anchors: Sequence[tuple[str, Sequence[int]]],
    raw: Sequence[np.ndarray],
    names: Sequence[str] | None = None,
    reference: Mapping[str, np.ndarray] | None = None,
    known: Mapping[int, str] | None = None,
) -> OutputMap:
    """Decide the mapping of ``raw`` outputs to ``anchors`` (see the module docstring).

    Args:
        anchors: (key, graph shape) of each anchor, in the converted model's output order.
        raw: The artifact's outputs, in its own order.
        names: The outputs' names in the artifact, if it has names.
        reference: Reference values by anchor key (graph layout), for the values rule.
        known: Rank → the layout the converter is documented to give outputs of that rank
            (onnx2tf: 4-D channels last); it decides a square tensor's layout before the
            other outputs and values do.

    Raises:
        OutputMapError: An anchor fits no output, or two anchors need the same output.
    """
    shapes = [tuple(np.shape(r)) for r in raw]
    names = list(names) if names is not None else [""] * len(raw)
    fit = [[fits(s, shape) for s in shapes] for _, shape in anchors]
    pairs: dict[int, tuple[int, str]] = {}  # anchor position → (output index, decided by)
    if len(raw) == len(anchors) and all(fit[a][a] for a in range(len(anchors))):
        pairs = {a: (a, "order") for a in range(len(anchors))}
    else:
        _by_shape(anchors, shapes, fit, pairs)
        _by_values(anchors, raw, fit, pairs, reference)
    entries, rule_index = [], 0
    by_rank = Counter(
        (len(anchors[a][1]), fit[a][i][0]) for a, (i, _) in pairs.items() if len(fit[a][i]) == 1
    )
    for a, (key, shape) in enumerate(anchors):
        i, decided = pairs[a]
        layout, layout_by = _layout(fit[a][i], shape, by_rank, raw[i], reference, key, known)
        rule_index = max(rule_index, RULES.index(decided))
        entries.append(Entry(key, i, names[i], layout, decided, layout_by))
    used = {i for i, _ in pairs.values()}
    unused = [i for i in range(len(raw)) if i not in used]
    return OutputMap(entries, RULES[rule_index], shapes, unused)


def _by_shape(
    anchors: Sequence[tuple[str, Sequence[int]]],
    shapes: list[tuple[int, ...]],
    fit: list[list[list[str]]],
    pairs: dict[int, tuple[int, str]],
) -> None:
    """Rule 2: assign by elimination every anchor whose output the shapes single out."""
    for a, (key, shape) in enumerate(anchors):
        if not any(fit[a]):
            raise OutputMapError(
                f"anchor {key!r} of shape {tuple(shape)} fits none of the artifact's outputs "
                f"(shapes {shapes})"
            )
    changed = True
    while changed:
        changed = False
        taken = {i for i, _ in pairs.values()}
        for a in range(len(anchors)):
            if a in pairs:
                continue
            options = [i for i in range(len(shapes)) if fit[a][i] and i not in taken]
            if not options:
                raise OutputMapError(
                    f"anchor {anchors[a][0]!r} needs an output that another anchor took"
                )
            if len(options) == 1:
                pairs[a] = (options[0], "shape")
                changed = True
                break


def _by_values(
    anchors: Sequence[tuple[str, Sequence[int]]],
    raw: Sequence[np.ndarray],
    fit: list[list[list[str]]],
    pairs: dict[int, tuple[int, str]],
    reference: Mapping[str, np.ndarray] | None,
) -> None:
    """Rule 3: anchors the shapes cannot tell apart, by values (else by relative order)."""
    left = [a for a in range(len(anchors)) if a not in pairs]
    if not left:
        return
    taken = {i for i, _ in pairs.values()}
    if reference is not None and all(anchors[a][0] in reference for a in left):
        scored = []
        for a in left:
            key, shape = anchors[a]
            for i, layouts in enumerate(fit[a]):
                if layouts and i not in taken:
                    array = np.asarray(raw[i])
                    best = min(
                        _rel_l2(to_graph_layout(array, lay, shape), reference[key])
                        for lay in layouts
                    )
                    scored.append((best, a, i))
        for _, a, i in sorted(scored):
            if a not in pairs and i not in taken:
                pairs[a] = (i, "values")
                taken.add(i)
    for a in left:
        if a in pairs:
            continue
        options = [i for i in range(len(raw)) if fit[a][i] and i not in taken]
        if not options:
            raise OutputMapError(f"anchor {anchors[a][0]!r} needs an output that another took")
        pairs[a] = (options[0], "relative order")
        taken.add(options[0])


def _layout(
    layouts: list[str],
    shape: Sequence[int],
    by_rank: Counter,
    array: np.ndarray,
    reference: Mapping[str, np.ndarray] | None,
    key: str,
    known: Mapping[int, str] | None = None,
) -> tuple[str, str]:
    """The layout of one matched output (see the module docstring)."""
    rank = len(shape)
    if len(layouts) == 1:
        return layouts[0], "shape"
    if known and known.get(rank) in layouts:
        return str(known[rank]), "converter"
    seen = [lay for lay in layouts if by_rank.get((rank, lay))]
    if seen:
        return max(seen, key=lambda lay: by_rank[(rank, lay)]), "other outputs"
    if reference is not None and key in reference:
        best = min(
            layouts,
            key=lambda lay: _rel_l2(to_graph_layout(np.asarray(array), lay, shape), reference[key]),
        )
        return best, "values"
    return layouts[0], "assumed"
