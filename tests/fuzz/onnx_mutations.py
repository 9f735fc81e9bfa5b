"""Mutations of the tiny CNN (``tests/pipeline/tiny_model.py``) as hypothesis strategies.

A mutation is a frozen dataclass with a readable ``repr`` (it is the case description the
fuzz log and the failure messages show) and a ``write(folder)`` that writes the mutated
file(s) and returns the model path. ``expect`` says what the CLI must do: ``refused``
(exit 2) for input that is wrong by construction, ``any`` (exit 0-3) otherwise.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import onnx
from fuzz_support import tiny_model
from hypothesis import strategies as st
from onnx import TensorProto, helper, numpy_helper

#: Names a hostile or careless user might give nodes and tensors.
ODD_NAMES = (
    "",
    " ",
    "<script>alert(1)</script>",
    '"onerror="alert(1)',
    "../../etc/passwd",
    "a/b/c",
    "x" * 5000,
    "nul\x00byte",
    "ünï©ødé ✓",
    "line\nbreak",
    "{}%s%n",
)

ELEM_TYPES = (0, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 16, 17, 21, 23, 99)


def _base() -> onnx.ModelProto:
    return onnx.load(str(tiny_model()))


def _node(model: onnx.ModelProto, index: int) -> onnx.NodeProto:
    return model.graph.node[index % len(model.graph.node)]


@dataclass(frozen=True)
class Truncated:
    """The file's first ``keep`` bytes (a download cut short)."""

    keep: int
    expect: str = "refused"

    def write(self, folder: Path) -> Path:
        data = tiny_model().read_bytes()
        path = folder / "truncated.onnx"
        path.write_bytes(data[: min(self.keep, len(data) - 1)])
        return path


@dataclass(frozen=True)
class Corrupted:
    """Bytes overwritten at some positions (a flipped disk sector)."""

    edits: tuple[tuple[int, int], ...]
    expect: str = "any"

    def write(self, folder: Path) -> Path:
        data = bytearray(tiny_model().read_bytes())
        for position, value in self.edits:
            data[position % len(data)] = value
        path = folder / "corrupted.onnx"
        path.write_bytes(bytes(data))
        return path


@dataclass(frozen=True)
class GraphEdit:
    """A structural edit of the graph (see :meth:`apply` for the kinds)."""

    kind: str
    index: int
    value: object
    expect: str = "any"

    def apply(self, model: onnx.ModelProto) -> None:
        graph = model.graph
        node = _node(model, self.index)
        if self.kind == "input_dtype":
            graph.input[0].type.tensor_type.elem_type = int(self.value)  # type: ignore[arg-type]
        elif self.kind == "output_dtype":
            graph.output[0].type.tensor_type.elem_type = int(self.value)  # type: ignore[arg-type]
        elif self.kind == "initializer_dtype":
            init = graph.initializer[self.index % len(graph.initializer)]
            init.data_type = int(self.value)  # type: ignore[arg-type]
        elif self.kind == "input_shape":
            dims = graph.input[0].type.tensor_type.shape.dim
            del dims[:]
            for d in self.value:  # type: ignore[attr-defined]
                dim = dims.add()
                if isinstance(d, str):
                    dim.dim_param = d
                else:
                    dim.dim_value = d
        elif self.kind == "initializer_shape":
            init = graph.initializer[self.index % len(graph.initializer)]
            del init.dims[:]
            init.dims.extend(self.value)  # type: ignore[arg-type]
        elif self.kind == "cycle":  # a node consumes a later node's output (or its own)
            first = self.index % len(graph.node)
            after = len(graph.node) - first - 1
            later = graph.node[first + 1 + int(self.value) % after] if after else node  # type: ignore[call-overload]
            node.input[0] = later.output[0]
        elif self.kind == "self_loop":
            node.input[0] = node.output[0]
        elif self.kind == "dangling_input":
            node.input[int(self.value) % len(node.input)] = "nobody_makes_this"  # type: ignore[call-overload]
        elif self.kind == "drop_node":
            del graph.node[self.index % len(graph.node)]
        elif self.kind == "drop_initializer":
            del graph.initializer[self.index % len(graph.initializer)]
        elif self.kind == "duplicate_output":
            node.output[0] = _node(model, self.index + 1).output[0]
        elif self.kind == "op_type":
            node.op_type = str(self.value)
        elif self.kind == "domain":
            node.domain = str(self.value)
        elif self.kind == "opset":
            graph_opset = model.opset_import[0]
            graph_opset.version = int(self.value)  # type: ignore[call-overload]
        elif self.kind == "node_name":
            node.name = str(self.value)
        elif self.kind == "tensor_name":  # rename a tensor everywhere (consistently)
            old = node.output[0]
            new = str(self.value)
            for other in graph.node:
                for i, name in enumerate(other.input):
                    if name == old:
                        other.input[i] = new
            node.output[0] = new
            for out in graph.output:
                if out.name == old:
                    out.name = new
        elif self.kind == "attribute":
            name, value = self.value  # type: ignore[misc]
            for i, attr in enumerate(node.attribute):
                if attr.name == name:
                    del node.attribute[i]
                    break
            kind = onnx.AttributeProto.INTS if isinstance(value, list) else None
            node.attribute.append(helper.make_attribute(name, value, attr_type=kind))
        elif self.kind == "extra_output":
            graph.output.append(
                helper.make_tensor_value_info(str(self.value), TensorProto.FLOAT, [1])
            )
        elif self.kind == "extra_input":
            graph.input.append(
                helper.make_tensor_value_info(str(self.value), TensorProto.FLOAT, [1, 3])
            )
        elif self.kind == "no_outputs":
            del graph.output[:]
        else:  # pragma: no cover - a strategy bug
            raise AssertionError(self.kind)

    def write(self, folder: Path) -> Path:
        model = _base()
        self.apply(model)
        path = folder / "edited.onnx"
        path.write_bytes(model.SerializeToString())
        return path


@dataclass(frozen=True)
class HugeInput:
    """The input declares an absurd shape (a memory bomb: 1x3x100000x100000 is 120 GB)."""

    dims: tuple[int, ...]
    expect: str = "refused"

    def write(self, folder: Path) -> Path:
        model = _base()
        dims = model.graph.input[0].type.tensor_type.shape.dim
        del dims[:]
        for d in self.dims:
            dims.add().dim_value = d
        path = folder / "huge.onnx"
        path.write_bytes(model.SerializeToString())
        return path


#: Where an external-data location may point, relative to a model inside ``folder/model``.
EXTERNAL_TARGETS = ("parent", "absolute", "dotdot_inside", "symlink_out", "fifo_out", "fifo_in")
SECRET = b"ANPRED-FUZZ-SECRET-" * 128


@dataclass(frozen=True)
class ExternalData:
    """An initializer whose data lies in a file the location names: outside the folder.

    ``fifo_in`` points inside the folder, at a named pipe: opening it would block forever.
    Every other target lies outside the model's folder and must be refused, never read.
    """

    target: str
    initializer: int = 0
    expect: str = "refused"

    def write(self, folder: Path) -> Path:
        model_dir = folder / "model"
        model_dir.mkdir()
        secret = folder / "secret.bin"
        secret.write_bytes(SECRET)
        location = {
            "parent": "../secret.bin",
            "absolute": str(secret),
            "dotdot_inside": "sub/../../secret.bin",
            "symlink_out": "link.bin",
            "fifo_out": "../pipe.bin",
            "fifo_in": "pipe.bin",
        }[self.target]
        if self.target == "symlink_out":
            (model_dir / "link.bin").symlink_to(secret)
        if self.target == "fifo_out":
            os.mkfifo(folder / "pipe.bin")
        if self.target == "fifo_in":
            os.mkfifo(model_dir / "pipe.bin")
        model = _base()
        init = model.graph.initializer[self.initializer % len(model.graph.initializer)]
        size = len(init.raw_data) or len(numpy_helper.to_array(init).tobytes())
        init.ClearField("raw_data")
        del init.float_data[:]
        init.data_location = TensorProto.EXTERNAL
        for key, value in (("location", location), ("offset", "0"), ("length", str(size))):
            entry = init.external_data.add()
            entry.key, entry.value = key, value
        path = model_dir / "external.onnx"
        path.write_bytes(model.SerializeToString())
        return path


@dataclass(frozen=True)
class Nested:
    """The CNN's head wrapped in ``If``/``Loop`` subgraphs, ``depth`` levels deep.

    ``op`` is ``If``, ``Loop`` or ``mixed`` (``If`` inside ``Loop`` inside ``If``...); the
    innermost subgraph reads the outer graph's tensor (an outer-scope reference).
    """

    op: str
    depth: int
    broken: bool = False
    expect: str = "any"

    def write(self, folder: Path) -> Path:
        model = _base()
        graph = model.graph
        head = list(graph.node)[-3:]  # pool, flatten, gemm → logits
        inner_nodes = head
        produced = "logits"
        for level in range(self.depth):
            out = f"nested{level}"
            inner_out = helper.make_tensor_value_info(produced, TensorProto.FLOAT, None)
            op = self.op if self.op != "mixed" else ("If", "Loop")[level % 2]
            if op == "If":
                then = helper.make_graph(inner_nodes, f"then{level}", [], [inner_out])
                other_out = f"e{level}" if self.broken else produced
                other_nodes = (
                    [helper.make_node("Identity", [produced], [other_out])]
                    if self.broken
                    else [onnx.NodeProto.FromString(n.SerializeToString()) for n in inner_nodes]
                )
                other = helper.make_graph(
                    other_nodes,
                    f"else{level}",
                    [],
                    [helper.make_tensor_value_info(other_out, TensorProto.FLOAT, None)],
                )
                cond = f"cond{level}"
                flag = helper.make_tensor(cond, TensorProto.BOOL, [], [True])
                const = helper.make_node("Constant", [], [cond], value=flag)
                node = helper.make_node(
                    "If", [cond], [out], then_branch=then, else_branch=other,
                    name=f"/nest/If{level}",
                )
                inner_nodes = [const, node]
            else:
                body = helper.make_graph(
                    inner_nodes,
                    f"body{level}",
                    [
                        helper.make_tensor_value_info(f"i{level}", TensorProto.INT64, []),
                        helper.make_tensor_value_info(f"c{level}", TensorProto.BOOL, []),
                    ],
                    [
                        helper.make_tensor_value_info(f"c{level}", TensorProto.BOOL, []),
                        inner_out,
                    ],
                )
                if not self.broken:  # the condition passes through the body
                    body.output[0].name = f"cout{level}"
                    body.node.append(helper.make_node("Identity", [f"c{level}"], [f"cout{level}"]))
                trip, cond = f"trip{level}", f"cond{level}"
                consts = [
                    helper.make_node("Constant", [], [trip],
                                     value=helper.make_tensor(trip, TensorProto.INT64, [], [1])),
                    helper.make_node("Constant", [], [cond],
                                     value=helper.make_tensor(cond, TensorProto.BOOL, [], [True])),
                ]
                node = helper.make_node("Loop", [trip, cond], [out], body=body,
                                        name=f"/nest/Loop{level}")
                inner_nodes = [*consts, node]
            produced = out
        del graph.node[-3:]
        graph.node.extend(inner_nodes)
        graph.output[0].name = produced
        del graph.output[0].type.tensor_type.shape.dim[:]
        path = folder / "nested.onnx"
        path.write_bytes(model.SerializeToString())
        return path


# --------------------------------------------------------------------------- strategies

_ATTRIBUTES = st.sampled_from(["pads", "strides", "kernel_shape", "dilations", "group",
                               "transB", "axis", "alpha", "auto_pad", "bogus"])
_ATTR_VALUES = st.one_of(
    st.lists(st.integers(-(2**40), 2**40), min_size=0, max_size=6),
    st.integers(-(2**62), 2**62),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["SAME_UPPER", "VALID", "nonsense", "", "x" * 1000]),
)
_DIMS = st.lists(
    st.one_of(st.integers(0, 64), st.sampled_from([-1, "N", "batch"])), min_size=0, max_size=6
)


def graph_edits() -> st.SearchStrategy[GraphEdit]:
    """Structural edits of every kind the issue names (and a few more)."""
    index = st.integers(0, 20)
    return st.one_of(
        st.builds(GraphEdit, st.sampled_from(["input_dtype", "output_dtype", "initializer_dtype"]),
                  index, st.sampled_from(ELEM_TYPES)),
        st.builds(GraphEdit, st.just("input_shape"), index, _DIMS.map(tuple)),
        st.builds(GraphEdit, st.just("initializer_shape"), index,
                  st.lists(st.integers(0, 40), max_size=5).map(tuple)),
        st.builds(GraphEdit, st.sampled_from(["cycle", "dangling_input", "self_loop"]),
                  index, st.integers(0, 5), st.just("refused")),
        st.builds(GraphEdit, st.sampled_from(["drop_node", "drop_initializer", "duplicate_output",
                                              "no_outputs"]), index, st.none()),
        st.builds(GraphEdit, st.just("op_type"), index,
                  st.sampled_from(["FooBar", "Relu", "Conv", "If", "Loop", "Scan", "Hardmax",
                                   "Resize", "", "Identity"])),
        st.builds(GraphEdit, st.just("domain"), index,
                  st.sampled_from(["com.microsoft", "com.evil", "ai.onnx.ml", "x" * 300])),
        st.builds(GraphEdit, st.just("opset"), index,
                  st.sampled_from([0, 1, 6, 11, 13, 21, 23, 99, 2**31 - 1])),
        st.builds(GraphEdit, st.sampled_from(["node_name", "tensor_name", "extra_output",
                                              "extra_input"]), index, st.sampled_from(ODD_NAMES)),
        st.builds(GraphEdit, st.just("attribute"), index, st.tuples(_ATTRIBUTES, _ATTR_VALUES)),
    )


def onnx_mutations() -> st.SearchStrategy[object]:
    """Every mutation family, byte-level and structural."""
    size = tiny_model().stat().st_size
    return st.one_of(
        st.builds(Truncated, st.integers(0, size - 1)),
        st.builds(Corrupted, st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, 255)),
                                      min_size=1, max_size=8).map(tuple)),
        graph_edits(),
        st.builds(HugeInput, st.sampled_from([(1, 3, 100000, 100000), (1, 3, 2**31, 2**31),
                                              (2**40, 3, 16, 16), (1, 3, 2**62, 2**62)])),
        st.builds(ExternalData, st.sampled_from(EXTERNAL_TARGETS), st.integers(0, 5)),
        st.builds(Nested, st.sampled_from(["If", "Loop", "mixed"]), st.integers(1, 3),
                  st.booleans()),
    )
