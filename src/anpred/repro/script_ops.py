"""Readable code for a reduced case, in the library's own ops, as anpred's translators call them.

For the libraries anpred runs through its translators (tensorflow, jax, paddle, torch on an
ONNX file), a reproducer must not import anpred: it is the few operators of the case
written out with the library's own functions (``tf.nn.conv2d`` on NHWC with the filter
transposed to HWIO, as :mod:`anpred.translate.tensorflow.ops_conv` calls it;
``lax.conv_general_dilated``; ``paddle.nn.functional.conv2d``; ``torch.nn.functional``).
Each ONNX op has one small writer per library (:data:`WRITERS`), registered by decorator;
an op without a writer is an :class:`UnsupportedOp`, reported, never guessed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import onnx
from onnx import helper

from anpred.errors import AnpredError
from anpred.translate.tensorflow.spatial import tf_padding


class UnsupportedOp(AnpredError):
    """An op of the case has no script writer for the library."""


@dataclass(frozen=True)
class Call:
    """One node, as a writer sees it: Python names of its inputs and output, attributes."""

    node: onnx.NodeProto
    inputs: tuple[str | None, ...]
    output: str
    shapes: dict[str, tuple[int, ...]]

    def attr(self, name: str, default: object = None) -> object:
        """An attribute's value."""
        for a in self.node.attribute:
            if a.name == name:
                return helper.get_attribute_value(a)
        return default

    def shape(self, index: int) -> tuple[int, ...]:
        """Static shape of input ``index``."""
        return self.shapes[self.node.input[index]]


Writer = Callable[[Call], list[str]]
#: library → ONNX op type → writer.
WRITERS: dict[str, dict[str, Writer]] = {"tensorflow": {}, "jax": {}, "paddle": {}, "torch": {}}
#: What each library's script imports (only the library and numpy).
IMPORTS = {
    "tensorflow": ["import tensorflow as tf"],
    "jax": ["import jax", "import jax.numpy as jnp", "from jax import lax"],
    "paddle": ["import paddle", "import paddle.nn.functional as F"],
    "torch": ["import torch", "import torch.nn.functional as F"],
}
#: How a numpy array becomes the library's tensor, and back.
TENSOR = {
    "tensorflow": ("tf.constant({})", "{}.numpy()"),
    "jax": ("jnp.asarray({})", "np.asarray({})"),
    "paddle": ("paddle.to_tensor({})", "{}.numpy()"),
    "torch": ("torch.from_numpy({})", "{}.detach().numpy()"),
}


def writes(libraries: Sequence[str], *ops: str) -> Callable[[Writer], Writer]:
    """Register a writer of ``ops`` for ``libraries``; a duplicate is an error."""

    def register(fn: Writer) -> Writer:
        for library in libraries:
            for op in ops:
                if op in WRITERS[library]:
                    raise AnpredError(f"{library} {op}: script writer registered twice")
                WRITERS[library][op] = fn
        return fn

    return register


def _pads(call: Call, kernel: Sequence[int]) -> list[tuple[int, int]]:
    auto = call.attr("auto_pad", b"NOTSET")
    auto = auto.decode() if isinstance(auto, bytes) else str(auto)
    if auto not in ("NOTSET", "VALID"):
        raise UnsupportedOp(f"{call.node.op_type} with auto_pad={auto}")
    pads = list(call.attr("pads", [0] * (2 * len(kernel))))  # type: ignore[arg-type]
    n = len(kernel)
    return [(int(pads[i]), int(pads[i + n])) for i in range(n)]


def _geometry(call: Call) -> tuple[list[int], list[int], list[int], list[tuple[int, int]]]:
    w = call.shape(1) if call.node.op_type == "Conv" else None
    kernel = list(call.attr("kernel_shape", None) or (w[2:] if w else []))  # type: ignore[arg-type]
    if len(kernel) != 2:
        raise UnsupportedOp(f"{call.node.op_type} over {len(kernel)} spatial axes")
    strides = [int(s) for s in call.attr("strides", [1, 1])]  # type: ignore[union-attr]
    dilations = [int(d) for d in call.attr("dilations", [1, 1])]  # type: ignore[union-attr]
    return [int(k) for k in kernel], strides, dilations, _pads(call, kernel)


# -- tensorflow: NHWC kernels, as the translators call them -------------------------------


@writes(["tensorflow"], "Conv")
def _tf_conv(call: Call) -> list[str]:
    kernel, strides, dilations, pads = _geometry(call)
    group = int(call.attr("group", 1))  # type: ignore[arg-type]
    x, w, b = (*call.inputs, None)[:3]
    c_in = call.shape(0)[1]
    padding = tf_padding(pads, call.shape(0)[2:], kernel, strides, dilations)
    y = call.output
    lines = [f"{y} = tf.transpose({x}, (0, 2, 3, 1))  # NCHW -> NHWC, TensorFlow's CPU layout"]
    if group == 1:
        lines.append(f"{y} = tf.nn.conv2d({y}, tf.transpose({w}, (2, 3, 1, 0)), {strides}, "
                     f"{padding!r}, dilations={dilations})  # filter OIHW -> HWIO")  # fmt: skip
    elif group == c_in:
        c_out = call.shape(1)[0]
        lines.append(
            f"{y} = tf.nn.depthwise_conv2d({y}, tf.transpose(tf.reshape({w}, ({c_in}, "
            f"{c_out // c_in}, {kernel[0]}, {kernel[1]})), (2, 3, 0, 1)), [1, *{strides}, 1], "
            f"{padding!r}, dilations={dilations})"
        )
    else:  # as the translation: split input and filter by group, one conv2d each, concat
        lines += [
            f"{y} = tf.concat([tf.nn.conv2d(xg, wg, {strides}, {padding!r}, "
            f"dilations={dilations}) for xg, wg in zip(tf.split({y}, {group}, axis=3), "
            f"tf.split(tf.transpose({w}, (2, 3, 1, 0)), {group}, axis=3))], axis=3)"
        ]
    if b is not None:
        lines.append(f"{y} = tf.nn.bias_add({y}, {b})")
    lines.append(f"{y} = tf.transpose({y}, (0, 3, 1, 2))  # NHWC -> NCHW")
    return lines


def _tf_pool(call: Call, fn: str) -> list[str]:
    kernel, strides, dilations, pads = _geometry(call)
    if dilations != [1, 1] or int(call.attr("ceil_mode", 0)):  # type: ignore[arg-type]
        raise UnsupportedOp(f"{call.node.op_type} with dilations or ceil_mode")
    padding = tf_padding(pads, call.shape(0)[2:], kernel, strides, dilations)
    if padding not in ("VALID", "SAME"):
        raise UnsupportedOp(f"{call.node.op_type} with explicit pads")
    x, y = call.inputs[0], call.output
    return [
        f"{y} = tf.nn.{fn}(tf.transpose({x}, (0, 2, 3, 1)), {kernel}, {strides}, {padding!r})",
        f"{y} = tf.transpose({y}, (0, 3, 1, 2))",
    ]


@writes(["tensorflow"], "MaxPool")
def _tf_maxpool(call: Call) -> list[str]:
    return _tf_pool(call, "max_pool2d")


@writes(["tensorflow"], "AveragePool")
def _tf_avgpool(call: Call) -> list[str]:
    return _tf_pool(call, "avg_pool2d")


_ELEMENTWISE = {
    "Add": ("tf.math.add", "jnp.add", "paddle.add", "torch.add"),
    "Sub": ("tf.math.subtract", "jnp.subtract", "paddle.subtract", "torch.sub"),
    "Mul": ("tf.math.multiply", "jnp.multiply", "paddle.multiply", "torch.mul"),
    "Div": ("tf.math.divide", "jnp.divide", "paddle.divide", "torch.div"),
}
_UNARY = {
    "Relu": ("tf.nn.relu", "jax.nn.relu", "F.relu", "F.relu"),
    "Sigmoid": ("tf.math.sigmoid", "jax.nn.sigmoid", "F.sigmoid", "torch.sigmoid"),
    "Tanh": ("tf.math.tanh", "jnp.tanh", "paddle.tanh", "torch.tanh"),
    "Exp": ("tf.math.exp", "jnp.exp", "paddle.exp", "torch.exp"),
    "Sqrt": ("tf.math.sqrt", "jnp.sqrt", "paddle.sqrt", "torch.sqrt"),
}
_ORDER = ("tensorflow", "jax", "paddle", "torch")


def _table_writer(table: dict[str, tuple[str, ...]], library: str) -> Writer:
    index = _ORDER.index(library)

    def write(call: Call) -> list[str]:
        fn = table[call.node.op_type][index]
        return [f"{call.output} = {fn}({', '.join(str(i) for i in call.inputs)})"]

    return write


for _lib in _ORDER:
    for _op in [*_ELEMENTWISE, *_UNARY]:
        WRITERS[_lib][_op] = _table_writer({**_ELEMENTWISE, **_UNARY}, _lib)


@writes(["tensorflow", "jax", "paddle", "torch"], "Sum")
def _sum(call: Call) -> list[str]:
    return [f"{call.output} = {' + '.join(str(i) for i in call.inputs)}"]


@writes(["tensorflow"], "MatMul")
def _tf_matmul(call: Call) -> list[str]:
    return [f"{call.output} = tf.linalg.matmul({call.inputs[0]}, {call.inputs[1]})"]


@writes(["tensorflow"], "Gemm")
def _tf_gemm(call: Call) -> list[str]:
    a, b = call.inputs[0], call.inputs[1]
    ta, tb = int(call.attr("transA", 0)), int(call.attr("transB", 0))  # type: ignore[arg-type]
    alpha, beta = float(call.attr("alpha", 1.0)), float(call.attr("beta", 1.0))  # type: ignore[arg-type]
    y = call.output
    lines = [f"{y} = tf.linalg.matmul({a}, {b}, transpose_a={bool(ta)}, transpose_b={bool(tb)})"]
    if alpha != 1.0:
        lines.append(f"{y} = {y} * {alpha!r}")
    if len(call.inputs) > 2 and call.inputs[2] is not None:
        c = call.inputs[2] if beta == 1.0 else f"{call.inputs[2]} * {beta!r}"
        lines.append(f"{y} = {y} + {c}")
    return lines


@writes(["tensorflow"], "GlobalAveragePool")
def _tf_gap(call: Call) -> list[str]:
    return [f"{call.output} = tf.math.reduce_mean({call.inputs[0]}, axis=(2, 3), keepdims=True)"]


@writes(["tensorflow"], "Softmax")
def _tf_softmax(call: Call) -> list[str]:
    axis = int(call.attr("axis", -1))  # type: ignore[arg-type]
    return [f"{call.output} = tf.nn.softmax({call.inputs[0]}, axis={axis})"]


@writes(["tensorflow", "jax", "paddle", "torch"], "Flatten", "Reshape")
def _reshape(call: Call) -> list[str]:
    shape = call.shapes[call.node.output[0]]
    fn = {"tensorflow": "tf.reshape", "jax": "jnp.reshape", "paddle": "paddle.reshape",
          "torch": "torch.reshape"}  # fmt: skip
    lib = call.node.doc_string or "tensorflow"
    return [f"{call.output} = {fn[lib]}({call.inputs[0]}, {list(shape)})"]


# -- jax, paddle, torch: NCHW ------------------------------------------------------------


@writes(["jax"], "Conv")
def _jax_conv(call: Call) -> list[str]:
    _, strides, dilations, pads = _geometry(call)
    group = int(call.attr("group", 1))  # type: ignore[arg-type]
    x, w, b = (*call.inputs, None)[:3]
    y = call.output
    lines = [
        f"{y} = lax.conv_general_dilated({x}, {w}, {strides}, {pads}, rhs_dilation={dilations}, "
        f"dimension_numbers=('NCHW', 'OIHW', 'NCHW'), feature_group_count={group})"
    ]
    if b is not None:
        lines.append(f"{y} = {y} + {b}.reshape(1, -1, 1, 1)")
    return lines


@writes(["torch", "paddle"], "Conv")
def _torch_conv(call: Call) -> list[str]:
    _, strides, dilations, pads = _geometry(call)
    group = int(call.attr("group", 1))  # type: ignore[arg-type]
    x, w, b = (*call.inputs, None)[:3]
    y = call.output
    if any(p[0] != p[1] for p in pads):
        raise UnsupportedOp("Conv with asymmetric pads")
    padding = [p[0] for p in pads]
    return [f"{y} = F.conv2d({x}, {w}, {b}, {strides}, {padding}, {dilations}, {group})"]


@writes(["jax", "torch", "paddle"], "MatMul")
def _matmul(call: Call) -> list[str]:
    return [f"{call.output} = {call.inputs[0]} @ {call.inputs[1]}"]


@writes(["jax", "torch", "paddle"], "Gemm")
def _gemm(call: Call) -> list[str]:
    a, b = call.inputs[0], call.inputs[1]
    ta, tb = int(call.attr("transA", 0)), int(call.attr("transB", 0))  # type: ignore[arg-type]
    if float(call.attr("alpha", 1.0)) != 1.0 or float(call.attr("beta", 1.0)) != 1.0:  # type: ignore[arg-type]
        raise UnsupportedOp("Gemm with alpha or beta")
    a = f"{a}.T" if ta else a
    b = f"{b}.T" if tb else b
    c = f" + {call.inputs[2]}" if len(call.inputs) > 2 and call.inputs[2] is not None else ""
    return [f"{call.output} = {a} @ {b}{c}"]


@writes(["jax", "torch", "paddle"], "GlobalAveragePool")
def _gap(call: Call) -> list[str]:
    return [f"{call.output} = {call.inputs[0]}.mean(axis=(2, 3), keepdims=True)"
            if call.node.doc_string in ("jax", "paddle") else
            f"{call.output} = {call.inputs[0]}.mean(dim=(2, 3), keepdim=True)"]  # fmt: skip


def body(library: str, model: onnx.ModelProto, names: dict[str, str]) -> list[str]:
    """The lines computing the model's output from its inputs (Python names ``names``).

    Raises:
        UnsupportedOp: An op has no writer for ``library``.
    """
    from onnx import shape_inference

    inferred = shape_inference.infer_shapes(model).graph
    shapes = {}
    for vi in [*inferred.input, *inferred.value_info, *inferred.output]:
        dims = vi.type.tensor_type.shape.dim
        shapes[vi.name] = tuple(int(d.dim_value) for d in dims)
    for init in inferred.initializer:
        shapes[init.name] = tuple(int(d) for d in init.dims)
    lines: list[str] = []
    for node in model.graph.node:
        writer = WRITERS[library].get(node.op_type)
        if writer is None:
            raise UnsupportedOp(f"{node.op_type} has no {library} script writer yet")
        out = f"v{len(names)}"
        names[node.output[0]] = out
        tagged = onnx.NodeProto()
        tagged.CopyFrom(node)
        tagged.doc_string = library  # writers shared by several libraries read it
        inputs = tuple(names.get(i) if i else None for i in node.input)
        lines.append(f"# {node.op_type} ({node.name or node.output[0]})")
        lines.extend(writer(Call(tagged, inputs, out, shapes)))
    return lines
