"""A user's own ONNX file: anchors by tensor name, inferred from module scopes, or automatic.

Runs in the prepare worker process (static shapes are materialised with onnxruntime).

The legacy torch exporter names nodes after module scopes (``/model.2/cv1/conv/Conv``);
the last tensor produced inside each top-level scope (``model.2``) becomes an anchor.
Graphs without scopes (paddle2onnx, tf2onnx, hand-built) get automatic stage anchors from
their dataflow graph (:mod:`anpred.interchange.auto_anchors`). A file that declares its
anchors as extra graph outputs named ``anchor.<key>`` (``python -m
anpred.zoo.transformer_export`` writes them) is anchored there. A model with several inputs
takes them packed into one float32 vector (:mod:`anpred.interchange.packing`), as every
runner feeds one array; ``packing.json`` in the run directory says how.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import onnx

from anpred.errors import UsageError
from anpred.interchange.export import AnchoredExport, AnchorOutput
from anpred.interchange.packing import PackedTensor
from anpred.zoo.spec import OUTPUT_ANCHOR

_SCOPE = re.compile(r"^/([^/]+)/")
#: Graph outputs named so (after the first, the model's output) are declared anchors.
DECLARED_PREFIX = "anchor."


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


def declared_anchors(model: onnx.ModelProto) -> list[tuple[str, str]]:
    """``(key, tensor)`` of the extra graph outputs named ``anchor.<key>``, in their order.

    The first graph output is the model's own output (its ``output`` anchor), never one of
    them.
    """
    return [
        (out.name.removeprefix(DECLARED_PREFIX), out.name)
        for out in model.graph.output[1:]
        if out.name.startswith(DECLARED_PREFIX) and len(out.name) > len(DECLARED_PREFIX)
    ]


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


def _static_model(
    source: Path,
    input_shapes: Mapping[str | None, tuple[int, ...]],
    image_size: int | None,
    folding_record: Path | None,
) -> onnx.ModelProto:
    """Load the file, fix its input shapes and fold its shape arithmetic (recorded)."""
    from anpred.interchange.folding import fold_shapes
    from anpred.interchange.input_shapes import (
        fix_input_shapes,
        graph_inputs,
        resolve_input_shapes,
    )

    model = load_onnx(source)
    shapes = resolve_input_shapes(graph_inputs(model), input_shapes, image_size, source.name)
    fix_input_shapes(model, shapes)
    model, record = fold_shapes(model, shapes)
    if folding_record is not None:
        from anpred.store.files import write_json

        write_json(folding_record, record)
    return model


def _packed(
    model: onnx.ModelProto, label: str, packing: list[PackedTensor] | None = None
) -> tuple[onnx.ModelProto, list[PackedTensor]]:
    """A copy of ``model`` whose several inputs come through one packed float32 input."""
    from anpred.interchange.input_shapes import graph_inputs
    from anpred.interchange.packing import pack_graph_inputs

    packed = onnx.ModelProto()
    packed.CopyFrom(model)
    found = pack_graph_inputs(packed, graph_inputs(model), label)
    if packing is not None and found != packing:
        raise AssertionError("the anchored and plain graphs pack their inputs differently")
    return packed, found


def _write_packing(path: Path | None, packing: list[PackedTensor]) -> None:
    from anpred.interchange.packing import PACKED_MODEL_INPUT, packed_size

    if path is None:
        return
    from anpred.store.files import write_json

    write_json(
        path,
        {
            "input": PACKED_MODEL_INPUT,
            "dtype": "float32",
            "size": packed_size(packing),
            "tensors": [t.to_dict() for t in packing],
        },
    )


def anchored_user_export(
    source: Path,
    folder: Path,
    anchors: Sequence[str] = (),
    input_shapes: Mapping[str | None, tuple[int, ...]] | None = None,
    image_size: int | None = None,
    folding_record: Path | None = None,
    stages: int | None = None,
    granularity: str = "stage",
    packing_record: Path | None = None,
) -> AnchoredExport:
    """Write ``anchored.onnx``/``plain.onnx`` for a user model and return the export.

    The input shapes are made concrete (:mod:`anpred.interchange.input_shapes`) and the
    shape arithmetic folded (:mod:`anpred.interchange.folding`) first. A model with several
    inputs is rewritten to take them packed into one float32 vector, unpacked in the graph
    before any anchor (:mod:`anpred.interchange.packing`): every runner feeds one array.

    Args:
        source: The user's ONNX file.
        folder: Where to write the graphs (inside the run directory).
        anchors: Tensor names to use as anchors; when empty, the file's declared anchors
            (graph outputs ``anchor.<key>``), else inferred from module scopes.
        input_shapes: ``--input-shape`` values by input name (``None``: the only input).
        image_size: Side of dynamic image height/width (the preprocessing's side).
        folding_record: Where to write the record of the folding (the run store's path).
        stages: ``--stages K``: automatic anchors (:mod:`anpred.interchange.auto_anchors`)
            even when node names carry scopes; they are used anyway when none do.
        granularity: ``stage`` or ``layer``: the default K of automatic anchors.
        packing_record: Where to write how several inputs are packed (the run store's path).

    Raises:
        UsageError: On an invalid file, unknown tensor names, dynamic input shapes
            nothing gives a value, or an input that cannot be packed exactly.
    """
    from anpred.interchange.auto_anchors import DEFAULT_STAGES, auto_anchors, has_scopes
    from anpred.interchange.input_shapes import graph_inputs
    from anpred.interchange.packing import PACKED_MODEL_INPUT, packed_size
    from anpred.interchange.static_shapes import annotate_static_shapes

    model = _static_model(source, input_shapes or {}, image_size, folding_record)
    inferred = annotate_static_shapes(model)
    graph = inferred.graph
    produced = {out for node in graph.node for out in node.output}
    unknown = [a for a in anchors if a not in produced]
    if unknown:
        raise UsageError(
            f"no tensor named {', '.join(unknown[:3])} in {source.name}; "
            "--anchors takes tensor names of the graph"
        )
    declared = declared_anchors(model)
    if anchors:
        keyed = [(a, a) for a in anchors]
    elif declared and stages is None:
        keyed = declared
    elif stages is not None or not has_scopes(model):
        keyed = auto_anchors(inferred, stages or DEFAULT_STAGES.get(granularity, 8))
    else:
        keyed = [(a, a) for a in infer_anchors(model)]
    inputs = graph_inputs(inferred)
    packing: list[PackedTensor] = []
    if len(inputs) > 1:
        model, packing = _packed(model, source.name)
        inferred, _ = _packed(inferred, source.name, packing)
        graph = inferred.graph
        input_name, shape, dtype = PACKED_MODEL_INPUT, (packed_size(packing),), "float32"
    else:
        input_name = inputs[0].name
        shape = tuple(int(d.dim_value) for d in inputs[0].type.tensor_type.shape.dim)
        dtype = onnx.helper.tensor_dtype_to_np_dtype(inputs[0].type.tensor_type.elem_type).name
    infos = {vi.name: vi for vi in list(graph.value_info) + list(graph.output)}
    final = graph.output[0].name
    folder.mkdir(parents=True, exist_ok=True)
    plain = onnx.ModelProto()
    plain.CopyFrom(model)
    del plain.graph.output[1:]
    onnx.save(annotate_static_shapes(plain), str(folder / "plain.onnx"))
    anchored = onnx.ModelProto()
    anchored.CopyFrom(inferred)
    del anchored.graph.output[:]
    anchored.graph.output.append(infos[final])
    records = []
    for key, name in keyed:
        if name not in infos:
            raise UsageError(f"cannot infer the shape of tensor {name!r}")
        anchored.graph.output.append(infos[name])
        shp = tuple(d.dim_value for d in infos[name].type.tensor_type.shape.dim)
        group = "user" if key == name or (key, name) in declared else "auto"
        records.append(AnchorOutput(key, key, "", group, name, shp))
    out_shape = tuple(d.dim_value for d in infos[final].type.tensor_type.shape.dim)
    records.append(AnchorOutput(OUTPUT_ANCHOR, OUTPUT_ANCHOR, "", "head", final, out_shape))
    onnx.save(annotate_static_shapes(anchored), str(folder / "anchored.onnx"))
    if packing:
        _write_packing(packing_record, packing)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 0)
    export = AnchoredExport(
        folder, input_name, shape, int(opset), tuple(records), input_dtype=dtype
    )
    (folder / "export.json").write_text(json.dumps(export.to_dict(), indent=1))
    return export
