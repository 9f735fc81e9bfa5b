"""A generic ONNX interpreter that executes a graph through one library's translators.

The interpreter owns the bookkeeping every library shares (topological walk, constants,
static shape arithmetic, output pruning, hooks); the maths happens in the registered
translators, built only from the library's own operators.

Static shape arithmetic (``Shape`` and integer-typed ops whose inputs are all static) is
evaluated once, at build time, with the ONNX reference evaluator: it is metadata about
shapes, not part of the model's numerical data path.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

from anpred.errors import MissingTranslatorError
from anpred.translate.adapter import LibraryAdapter
from anpred.translate.registry import NodeCall, lookup
from anpred.translate.subgraphs import Subgraph, graph_attributes, outer_names, subgraph_model

#: Called after every translated node with (node call, outputs); returns outputs. The same
#: signature serves as a pre-hook, called with (node call, inputs) and returning inputs.
NodeHook = Callable[[NodeCall, list[Any]], list[Any]]

_INT_TYPES = {
    onnx.TensorProto.INT64,
    onnx.TensorProto.INT32,
    onnx.TensorProto.INT16,
    onnx.TensorProto.INT8,
    onnx.TensorProto.UINT8,
    onnx.TensorProto.BOOL,
}


@dataclass(frozen=True)
class _Step:
    call: NodeCall
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    fn: Callable[..., Any]


def default_opset(model: onnx.ModelProto) -> int:
    """Return the opset version of the default ONNX domain."""
    for entry in model.opset_import:
        if entry.domain in ("", "ai.onnx"):
            return int(entry.version)
    return 1


def _value_info(model: onnx.ModelProto) -> dict[str, onnx.ValueInfoProto]:
    graph = model.graph
    infos = {}
    for vi in list(graph.input) + list(graph.value_info) + list(graph.output):
        infos[vi.name] = vi
    return infos


def _static_shape(vi: onnx.ValueInfoProto | None) -> tuple[int, ...] | None:
    if vi is None or not vi.type.HasField("tensor_type"):
        return None
    tt = vi.type.tensor_type
    if not tt.HasField("shape"):
        return None
    dims = []
    for dim in tt.shape.dim:
        if not dim.HasField("dim_value"):
            return None
        dims.append(int(dim.dim_value))
    return tuple(dims)


def _elem_type(vi: onnx.ValueInfoProto | None) -> int | None:
    if vi is None or not vi.type.HasField("tensor_type"):
        return None
    return int(vi.type.tensor_type.elem_type)


def _fold(
    node: onnx.NodeProto, values: Sequence[np.ndarray | None], opset: int
) -> list[np.ndarray]:
    """Evaluate one node on static inputs with the ONNX reference evaluator."""
    from onnx.reference import ReferenceEvaluator

    names = [name for name in node.input if name]
    graph_inputs = [
        helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(val.dtype), val.shape)
        for name, val in zip(node.input, values, strict=True)
        if name and val is not None
    ]
    graph = helper.make_graph(
        [node],
        "fold",
        graph_inputs,
        [helper.make_empty_tensor_value_info(name) for name in node.output],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    feeds = {name: val for name, val in zip(node.input, values, strict=True) if name}
    del names
    return [np.asarray(v) for v in ReferenceEvaluator(model).run(None, feeds)]


class GraphProgram:
    """An ONNX graph prepared for execution through one library.

    Args:
        model: The ONNX model (static input shapes expected).
        adapter: The library adapter; its translators must already be registered.
        outputs: Names of the values to return; defaults to the graph outputs.
        feeds: Names of the values supplied at run time; defaults to the graph inputs.
            Naming intermediate values here runs only the part of the graph between
            them and ``outputs`` (stage isolation).
        hook: Optional function called after every node (fault injection).
        pre_hook: Optional function called before every node with its inputs (``None``
            for missing optional inputs); returns the inputs the node runs on (fault
            injection into an op's operands).

    Raises:
        MissingTranslatorError: When a node's op has no translator for the library (every
            op outside ONNX's default domain has none).
    """

    def __init__(
        self,
        model: onnx.ModelProto,
        adapter: LibraryAdapter,
        outputs: Sequence[str] | None = None,
        feeds: Sequence[str] | None = None,
        hook: NodeHook | None = None,
        pre_hook: NodeHook | None = None,
    ) -> None:
        self.adapter = adapter
        self.hook = hook
        self.pre_hook = pre_hook
        self.opset = default_opset(model)
        inferred = shape_inference.infer_shapes(model)
        infos = _value_info(inferred)
        graph = model.graph
        initializer_names = {init.name for init in graph.initializer}
        self.feeds = (
            list(feeds)
            if feeds is not None
            else [vi.name for vi in graph.input if vi.name not in initializer_names]
        )
        self.outputs = list(outputs) if outputs is not None else [o.name for o in graph.output]
        self.output_dtypes: dict[str, np.dtype | None] = {
            name: _np_dtype(_elem_type(infos.get(name))) for name in self.outputs
        }
        static: dict[str, np.ndarray] = {
            init.name: numpy_helper.to_array(init)
            for init in graph.initializer
            if init.name not in self.feeds
        }
        needed = self._needed_nodes(graph.node, set(self.feeds), set(self.outputs))
        self._consts: dict[str, Any] = {}
        self._steps: list[_Step] = []
        for node in needed:
            shapes_in = tuple(_static_shape(infos.get(n)) if n else None for n in node.input)
            shapes_out = tuple(_static_shape(infos.get(n)) for n in node.output)
            values_in = tuple(static.get(n) if n else None for n in node.input)
            if self._try_static(node, values_in, shapes_in, infos, static):
                continue
            attrs = {a.name: _attr_value(a) for a in node.attribute}
            call = NodeCall(
                op_type=node.op_type,
                name=node.name or node.output[0],
                attrs=attrs,
                opset=self.opset,
                consts=values_in,
                input_shapes=shapes_in,
                output_shapes=shapes_out,
                library=adapter.name,
            )
            if node.domain not in ("", "ai.onnx"):  # translators are for ONNX's own ops
                raise MissingTranslatorError(
                    f"{node.domain}.{node.op_type}", self.opset, call.name, adapter.name
                )
            fn = lookup(adapter.name, node.op_type, self.opset, call.name)
            inputs = tuple(node.input)
            if any(True for _ in graph_attributes(node)):
                call, outer = self._with_subgraphs(call, node, model, static, infos)
                inputs += outer  # the run-time outer values follow the node's inputs
            self._steps.append(_Step(call, inputs, tuple(node.output), fn))
        for step in self._steps:
            for name in step.inputs:
                if name and name in static and name not in self._consts:
                    self._consts[name] = adapter.const(static[name])
        self._static_outputs = {n: static[n] for n in self.outputs if n in static}
        self._compiled = adapter.compile(self._execute)

    def _with_subgraphs(
        self,
        call: NodeCall,
        node: onnx.NodeProto,
        model: onnx.ModelProto,
        static: Mapping[str, np.ndarray],
        infos: Mapping[str, onnx.ValueInfoProto],
    ) -> tuple[NodeCall, tuple[str, ...]]:
        """``call`` with a program per subgraph in ``extra["subgraphs"]``, and the run-time
        outer names the node's step reads (:mod:`anpred.translate.subgraphs`).
        """
        subgraphs, dynamic = {}, []
        for attr, body in graph_attributes(node):
            outer = [name for name in outer_names(body) if name not in static]
            program = GraphProgram(
                subgraph_model(body, outer_names(body), static, infos, model),
                self.adapter,
                outputs=[vi.name for vi in body.output],
                feeds=[vi.name for vi in body.input] + outer,
                hook=self.hook,
                pre_hook=self.pre_hook,
            )
            subgraphs[attr] = Subgraph(program, tuple(outer))
            dynamic += [name for name in outer if name not in dynamic]
        return replace(call, extra={"subgraphs": subgraphs}), tuple(dynamic)

    def execute(self, *values: Any) -> tuple[Any, ...]:
        """Run the graph on library values (the feeds, in order), uncompiled: how a
        control-flow translator runs a subgraph inside the enclosing graph's run.
        """
        return self._execute(self._consts, *values)

    @property
    def op_types(self) -> list[str]:
        """Op types executed by the library (after static folding), in graph order, unique."""
        return list(dict.fromkeys(step.call.op_type for step in self._steps))

    @staticmethod
    def _needed_nodes(
        nodes: Iterable[onnx.NodeProto], feeds: set[str], outputs: set[str]
    ) -> list[onnx.NodeProto]:
        nodes = list(nodes)
        producer = {}
        for index, node in enumerate(nodes):
            for out in node.output:
                producer[out] = index
        keep: set[int] = set()
        stack = [name for name in outputs if name not in feeds]
        while stack:
            name = stack.pop()
            index = producer.get(name)
            if index is None or index in keep:
                continue
            keep.add(index)
            stack.extend(n for n in nodes[index].input if n and n not in feeds)
            for _, body in graph_attributes(nodes[index]):  # values its subgraphs read
                stack.extend(n for n in outer_names(body) if n not in feeds)
        return [node for index, node in enumerate(nodes) if index in keep]

    def _try_static(
        self,
        node: onnx.NodeProto,
        values_in: tuple[np.ndarray | None, ...],
        shapes_in: tuple[tuple[int, ...] | None, ...],
        infos: Mapping[str, onnx.ValueInfoProto],
        static: dict[str, np.ndarray],
    ) -> bool:
        """Fold a node at build time when it is constant or static shape arithmetic."""
        if node.op_type == "Constant":
            (value,) = _fold(node, [], self.opset)
            static[node.output[0]] = value
            return True
        if node.op_type == "Shape" and shapes_in and shapes_in[0] is not None:
            start = next((a.i for a in node.attribute if a.name == "start"), 0)
            end = next((a.i for a in node.attribute if a.name == "end"), None)
            static[node.output[0]] = np.asarray(shapes_in[0][start:end], dtype=np.int64)
            return True
        if any(True for _ in graph_attributes(node)):  # subgraphs read the enclosing scope
            return False
        present = [v for n, v in zip(node.input, values_in, strict=True) if n]
        all_int_out = all(_elem_type(infos.get(n)) in _INT_TYPES for n in node.output)
        if present and all(v is not None for v in present) and all_int_out:
            for name, value in zip(node.output, _fold(node, values_in, self.opset), strict=True):
                static[name] = value
            return True
        return False

    def _execute(self, consts: dict[str, Any], *feed_values: Any) -> tuple[Any, ...]:
        env: dict[str, Any] = dict(consts)
        env.update(zip(self.feeds, feed_values, strict=True))
        for step in self._steps:
            args = [env[name] if name else None for name in step.inputs]
            if self.pre_hook is not None:
                args = self.pre_hook(step.call, args)
            result = step.fn(step.call, *args)
            results = list(result) if isinstance(result, list | tuple) else [result]
            if self.hook is not None:
                results = self.hook(step.call, results)
            for name, value in zip(step.outputs, results, strict=False):
                if name:
                    env[name] = value
        return tuple(
            env[name] if name in env else self.adapter.const(self._static_outputs[name])
            for name in self.outputs
        )

    def run(self, feeds: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Execute the graph on numpy feeds; return library values by output name."""
        values = [self.adapter.feed(np.asarray(feeds[name])) for name in self.feeds]
        results = self._compiled(self._consts, *values)
        return dict(zip(self.outputs, results, strict=True))


def _np_dtype(elem_type: int | None) -> np.dtype | None:
    """The numpy dtype of an ONNX element type (``None`` when unknown or not numpy's)."""
    if not elem_type:
        return None
    try:
        return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type))
    except (KeyError, TypeError, ValueError):
        return None


def _attr_value(attr: onnx.AttributeProto) -> Any:
    value = helper.get_attribute_value(attr)
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    if isinstance(value, bytes):
        return value.decode()
    if isinstance(value, list) and value and isinstance(value[0], bytes):
        return [v.decode() for v in value]
    return value
