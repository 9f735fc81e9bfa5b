"""A user's own ONNX file: anchors by tensor name, or inferred from module scopes.

Runs in the prepare worker process (static shapes are materialised with onnxruntime).

The legacy torch exporter names nodes after module scopes (``/model.2/cv1/conv/Conv``);
the last tensor produced inside each top-level scope (``model.2``) becomes an anchor.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path

import onnx

from anpred.errors import UsageError
from anpred.interchange.export import AnchoredExport, AnchorOutput
from anpred.zoo.spec import OUTPUT_ANCHOR

_SCOPE = re.compile(r"^/([^/]+)/")


def load_onnx(path: Path) -> onnx.ModelProto:
    """Load and check an ONNX file.

    Raises:
        UsageError: When the file is missing, unreadable or not a valid ONNX model.
    """
    if not path.is_file():
        raise UsageError(f"ONNX file {str(path)!r} does not exist")
    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as err:
        # the checker spreads one message over lines ("... of node:\n name: X ..."): join
        first = " ".join(str(err).split())[:300]
        raise UsageError(f"{str(path)!r} is not a valid ONNX model: {first}") from None
    if not model.graph.node:
        raise UsageError(f"{str(path)!r} has an empty graph")
    return model


def _scope(node: onnx.NodeProto) -> str | None:
    match = _SCOPE.match(node.name or "")
    return match.group(1) if match else None


def infer_anchors(model: onnx.ModelProto) -> list[str]:
    """Anchor tensors from module scopes: the last output of each top-level scope."""
    last: dict[str, str] = {}
    order: list[str] = []
    for node in model.graph.node:
        scope = _scope(node)
        if scope is None or not node.output:
            continue
        if scope not in last:
            order.append(scope)
        last[scope] = node.output[0]
    finals = {o.name for o in model.graph.output}
    return [last[s] for s in order if last[s] not in finals]


def anchored_user_export(source: Path, folder: Path, anchors: Sequence[str] = ()) -> AnchoredExport:
    """Write ``anchored.onnx``/``plain.onnx`` for a user model and return the export.

    Args:
        source: The user's ONNX file.
        folder: Where to write the graphs (inside the run directory).
        anchors: Tensor names to use as anchors; inferred from module scopes when empty.

    Raises:
        UsageError: On an invalid file, unknown tensor names, or dynamic input shapes.
    """
    model = load_onnx(source)
    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    produced = {out for node in graph.node for out in node.output}
    unknown = [a for a in anchors if a not in produced]
    if unknown:
        raise UsageError(
            f"no tensor named {', '.join(unknown[:3])} in {source.name}; "
            "--anchors takes tensor names of the graph"
        )
    names = list(anchors) or infer_anchors(model)
    inits = {i.name for i in graph.initializer}
    inputs = [i for i in graph.input if i.name not in inits]
    if len(inputs) != 1:
        raise UsageError(f"{source.name} has {len(inputs)} inputs; anpred supports one input")
    dims = inputs[0].type.tensor_type.shape.dim
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1 for d in dims)
    if any(s <= 0 for s in shape):
        raise UsageError(f"{source.name}: input shape {shape} is not static")
    infos = {vi.name: vi for vi in list(graph.value_info) + list(graph.output)}
    final = graph.output[0].name
    folder.mkdir(parents=True, exist_ok=True)
    plain = onnx.ModelProto()
    plain.CopyFrom(model)
    del plain.graph.output[1:]
    from anpred.interchange.static_shapes import annotate_static_shapes

    onnx.save(annotate_static_shapes(plain), str(folder / "plain.onnx"))
    anchored = onnx.ModelProto()
    anchored.CopyFrom(inferred)
    del anchored.graph.output[:]
    anchored.graph.output.append(infos[final])
    records = []
    for name in names:
        if name not in infos:
            raise UsageError(f"cannot infer the shape of tensor {name!r}")
        anchored.graph.output.append(infos[name])
        shp = tuple(d.dim_value for d in infos[name].type.tensor_type.shape.dim)
        records.append(AnchorOutput(name, name, "", "user", name, shp))
    out_shape = tuple(d.dim_value for d in infos[final].type.tensor_type.shape.dim)
    records.append(AnchorOutput(OUTPUT_ANCHOR, OUTPUT_ANCHOR, "", "head", final, out_shape))
    onnx.save(annotate_static_shapes(anchored), str(folder / "anchored.onnx"))
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    export = AnchoredExport(folder, inputs[0].name, shape, int(opset), tuple(records))
    (folder / "export.json").write_text(json.dumps(export.to_dict(), indent=1))
    return export
