"""Give every value of an ONNX graph its concrete static shape.

ONNX shape inference cannot always follow shape arithmetic (``Shape → Gather → Div →
Slice``, as torch exports ``chunk``), and leaves symbolic dims downstream. Translators
need static shapes, so the export runs the graph once on zeros with onnxruntime (all
optimizations off, every value exposed) and records each value's shape and dtype as
``value_info``. Runs in a worker process (it imports onnxruntime).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper

_DTYPES = {
    onnx.TensorProto.FLOAT: np.float32,
    onnx.TensorProto.DOUBLE: np.float64,
    onnx.TensorProto.FLOAT16: np.float16,
    onnx.TensorProto.INT64: np.int64,
    onnx.TensorProto.INT32: np.int32,
}


def _static(vi: onnx.ValueInfoProto) -> bool:
    dims = vi.type.tensor_type.shape.dim
    return vi.type.tensor_type.HasField("shape") and all(d.HasField("dim_value") for d in dims)


def annotate_static_shapes(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return a copy of ``model`` whose every node output has a static ``value_info``.

    Raises:
        ValueError: When the graph inputs do not have static shapes.
    """
    import onnxruntime as ort

    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    known = {vi.name: vi for vi in list(graph.value_info) + list(graph.output) if _static(vi)}
    missing = [o for n in graph.node for o in n.output if o and o not in known]
    if not missing:
        return inferred
    probe = onnx.ModelProto()
    probe.CopyFrom(model)
    del probe.graph.value_info[:]
    outputs = {o.name for o in probe.graph.output}
    for name in missing:
        if name not in outputs:
            probe.graph.output.append(helper.make_empty_tensor_value_info(name))
    inits = {i.name for i in graph.initializer}
    feeds = {}
    for vi in graph.input:
        if vi.name in inits:
            continue
        if not _static(vi):
            raise ValueError(f"input {vi.name} has no static shape")
        shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
        elem = vi.type.tensor_type.elem_type
        dtype = _DTYPES.get(elem) or helper.tensor_dtype_to_np_dtype(elem)  # bool, int8...
        feeds[vi.name] = np.zeros(shape, dtype)
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.log_severity_level = 3
    session = ort.InferenceSession(
        probe.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    values = session.run(missing, feeds)
    result = onnx.ModelProto()
    result.CopyFrom(inferred)
    drop = set(missing)
    kept = [vi for vi in result.graph.value_info if vi.name not in drop]
    del result.graph.value_info[:]
    result.graph.value_info.extend(kept)
    outputs_by_name = {o.name: o for o in result.graph.output}
    for name, value in zip(missing, values, strict=True):
        elem = helper.np_dtype_to_tensor_dtype(np.asarray(value).dtype)
        info = helper.make_tensor_value_info(name, elem, list(np.shape(value)))
        if name in outputs_by_name:
            outputs_by_name[name].CopyFrom(info)
        else:
            result.graph.value_info.append(info)
    return result
