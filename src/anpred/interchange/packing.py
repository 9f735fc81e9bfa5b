"""Several tensors through one graph input: a flat float32 vector, unpacked in the graph.

Every runner anpred drives (torch, onnxruntime, openvino, the translated libraries and the
converted deployment runtimes) feeds one array per inference. Graphs that need several
tensors -- a drill graph's stage inputs (:mod:`anpred.interchange.drill_graph`), a user
model with several inputs (:func:`pack_graph_inputs`) -- therefore take one flat float32
vector, the tensors end to end, and unpack it with ``Slice`` + ``Reshape`` nodes (plus a
``Cast`` back to a tensor's own dtype when it is not float32) under the names the graph's
nodes read. ``Slice`` takes its bounds as inputs from opset 10 on and as attributes before,
so the unpacking works down to opset 9.

The packing is **exact**: a value is packed only when float32 represents it exactly (every
integer with ``|v| <= 2**24``, every float16 and float32 value), so the tensors the graph
unpacks, and the fp64 reference's float64 view of the packed vector, hold the very values
given; anything else is refused in one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from anpred.errors import UsageError

#: Name of the packed graph input of a user model with several inputs.
PACKED_MODEL_INPUT = "anpred.inputs"
#: Name prefix of the unpacking nodes of a user model (``anpred.unpack/in0/Slice``).
UNPACK_PREFIX = "anpred.unpack/in"
#: Largest integer magnitude below which float32 represents every integer exactly.
EXACT_INT_LIMIT = 2**24
#: Dtypes a packed tensor may have (restored by ``Cast`` when not float32).
PACKABLE = frozenset(
    {"float32", "float16", "int64", "int32", "int16", "int8", "uint8", "uint16", "bool"}
)


@dataclass(frozen=True)
class PackedTensor:
    """One tensor of a packed vector.

    Attributes:
        name: The tensor name the graph's nodes read.
        shape: Its shape.
        offset: First element in the packed vector.
        dtype: NumPy dtype name it is restored to (``Cast`` when not float32).
    """

    name: str
    shape: tuple[int, ...]
    offset: int
    dtype: str = "float32"

    @property
    def size(self) -> int:
        """Number of elements."""
        return int(np.prod(self.shape, dtype=np.int64))

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"name": self.name, "dtype": self.dtype, "shape": list(self.shape),
                "offset": self.offset, "size": self.size}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PackedTensor:
        """Inverse of :meth:`to_dict`."""
        return cls(str(data["name"]), tuple(int(d) for d in data["shape"]),
                   int(data["offset"]), str(data.get("dtype", "float32")))


def layout(tensors: Sequence[tuple[str, Sequence[int], str]]) -> list[PackedTensor]:
    """Offsets of ``(name, shape, dtype)`` tensors packed end to end, in the given order."""
    packed, offset = [], 0
    for name, shape, dtype in tensors:
        packed.append(PackedTensor(name, tuple(int(d) for d in shape), offset, dtype))
        offset += packed[-1].size
    return packed


def packed_size(tensors: Sequence[PackedTensor]) -> int:
    """Elements of the packed vector."""
    return sum(t.size for t in tensors)


def unpack_nodes(
    packed: str, tensors: Sequence[PackedTensor], opset: int, prefix: str
) -> tuple[list[onnx.NodeProto], list[onnx.TensorProto]]:
    """``Slice`` + ``Reshape`` (+ ``Cast``) per packed tensor, and their constant initializers.

    Args:
        packed: Name of the packed float32 vector.
        tensors: What it holds.
        opset: The graph's default-domain opset (``Slice`` bounds are attributes below 10).
        prefix: Node and initializer name prefix; tensor ``i`` uses ``{prefix}{i}/...``.
    """
    nodes, consts = [], []
    for index, item in enumerate(tensors):
        base = f"{prefix}{index}"
        bounds = {"starts": [item.offset], "ends": [item.offset + item.size], "axes": [0]}
        shape = {"shape": list(item.shape)}
        values = {**bounds, **shape} if opset >= 10 else shape
        for suffix, value in values.items():
            consts.append(numpy_helper.from_array(np.array(value, np.int64), f"{base}/{suffix}"))
        flat = f"{base}/flat"
        if opset >= 10:
            names = [f"{base}/{suffix}" for suffix in bounds]
            nodes.append(helper.make_node("Slice", [packed, *names], [flat], name=f"{base}/Slice"))
        else:
            nodes.append(
                helper.make_node("Slice", [packed], [flat], name=f"{base}/Slice", **bounds)
            )
        cast = item.dtype != "float32"
        shaped = f"{base}/shaped" if cast else item.name
        nodes.append(
            helper.make_node("Reshape", [flat, f"{base}/shape"], [shaped], name=f"{base}/Reshape")
        )
        if cast:
            to = helper.np_dtype_to_tensor_dtype(np.dtype(item.dtype))
            nodes.append(
                helper.make_node("Cast", [shaped], [item.name], name=f"{base}/Cast", to=to)
            )
    return nodes, consts


def pack(
    tensors: Sequence[PackedTensor], values: Mapping[Any, np.ndarray], keys: Sequence[Any],
    label: str = "input",
) -> np.ndarray:
    """The packed float32 vector of ``values[keys[i]]`` for ``tensors[i]``.

    Args:
        tensors: The layout.
        values: Arrays by key.
        keys: The key of each tensor's array, in layout order.
        label: What messages call a tensor (``input``).

    Raises:
        UsageError: A missing array, a wrong shape, or a value float32 cannot hold exactly.
    """
    parts = []
    for item, key in zip(tensors, keys, strict=True):
        if key not in values:
            raise UsageError(f"{label} {item.name} has no value")
        value = np.asarray(values[key])
        if value.shape != item.shape:
            raise UsageError(f"{label} {item.name} has shape {value.shape}, expected {item.shape}")
        flat = value.reshape(-1).astype(np.float32)
        exact = value.dtype == np.float32 or value.dtype == np.bool_ or np.array_equal(
            flat.astype(value.dtype), value.reshape(-1)
        )
        if not exact:
            raise UsageError(
                f"{label} {item.name} ({value.dtype}) holds values float32 cannot represent "
                f"exactly (integers need |v| <= 2**24 = {EXACT_INT_LIMIT}), so it cannot be "
                "packed into the model's one float32 input"
            )
        parts.append(flat)
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def default_opset(model: onnx.ModelProto) -> int:
    """The default-domain opset ``model`` imports (the newest one onnx knows if none)."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return int(onnx.defs.onnx_opset_version())


def pack_graph_inputs(
    model: onnx.ModelProto, inputs: Sequence[onnx.ValueInfoProto], label: str
) -> list[PackedTensor]:
    """Replace ``model``'s inputs (static shapes) by one packed float32 vector (in place).

    The unpacking nodes come first, named ``anpred.unpack/in{i}/...``; they write the
    original input names, so every other node, and every anchor, is unchanged.

    Args:
        model: The model; its inputs have static shapes.
        inputs: Its real inputs (initializers left out), in the order to pack them.
        label: The model, as messages name it.

    Returns:
        The packing (names, dtypes, shapes, offsets).

    Raises:
        UsageError: An input of a dtype that cannot be packed exactly (float64, strings...).
    """
    specs = []
    for vi in inputs:
        dtype = np.dtype(helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)).name
        if dtype not in PACKABLE:
            raise UsageError(
                f"input {vi.name} of {label} is {dtype}; anpred feeds several inputs through "
                f"one float32 vector, which holds {', '.join(sorted(PACKABLE))} exactly"
            )
        shape = [int(d.dim_value) for d in vi.type.tensor_type.shape.dim]
        specs.append((vi.name, shape, dtype))
    tensors = layout(specs)
    nodes, consts = unpack_nodes(PACKED_MODEL_INPUT, tensors, default_opset(model), UNPACK_PREFIX)
    graph = model.graph
    names = {vi.name for vi in inputs}
    kept = [vi for vi in graph.input if vi.name not in names]
    del graph.input[:]
    graph.input.append(
        helper.make_tensor_value_info(PACKED_MODEL_INPUT, TensorProto.FLOAT, [packed_size(tensors)])
    )
    graph.input.extend(kept)
    body = list(graph.node)
    del graph.node[:]
    graph.node.extend([*nodes, *body])
    graph.initializer.extend(consts)
    if model.ir_version < 4:  # IR < 4: every initializer is also a graph input
        graph.input.extend(
            helper.make_tensor_value_info(c.name, c.data_type, list(c.dims)) for c in consts
        )
    return tensors


def is_unpack_node(node: onnx.NodeProto) -> bool:
    """Whether ``node`` unpacks a user model's packed input (it belongs to no stage)."""
    return node.name.startswith(UNPACK_PREFIX)
