"""Export a user's torch module with its anchors, as a zoo model is exported.

The module is built from its source (:mod:`anpred.interchange.user_module`), its state saved
next to the export, its anchors planned from its module tree
(:mod:`anpred.interchange.module_plan`, or the user's module paths) and both graphs written by
:func:`~anpred.interchange.export.export_anchored` on the example inputs. Then, as for a
user's ONNX file, their constant arithmetic is folded (onnxslim, checked on onnxruntime:
:func:`~anpred.interchange.folding.fold_shapes`; the record goes to ``folding.json``) --
swin_t's attention masks are 45 ``ScatterND`` on constants, which no translator needs to
run once folded (6261 nodes before, 494 after, every anchor unchanged) -- and a module with
several inputs takes them packed into one float32 vector, unpacked in the graph
(:mod:`anpred.interchange.packing`): every runner feeds one array. Runs in the export job's
process (torch).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path

from anpred.errors import UsageError
from anpred.interchange.export import DEFAULT_OPSET, AnchoredExport, export_anchored, plan_anchors
from anpred.interchange.module_plan import module_plan
from anpred.interchange.user_module import build_user_module, save_state


def _failing_operation(err: BaseException) -> str:
    """The one line of an export error that names what failed."""
    lines = [" ".join(line.split()) for line in str(err).splitlines() if line.strip()]
    named = [line for line in lines if "operator" in line or "aten::" in line]
    text = (named or lines or [err.__class__.__name__])[0]
    return text[:300]


def _fold(
    export: AnchoredExport, shapes: Mapping[str, Sequence[int]], folding_record: Path | None
) -> None:
    """Fold both graphs' constant arithmetic in place; record the anchored graph's folding."""
    import onnx

    from anpred.interchange.folding import fold_shapes
    from anpred.store.files import write_json

    for path in (export.anchored_path, export.plain_path):
        folded, record = fold_shapes(onnx.load(str(path)), shapes)
        if record.get("used"):
            onnx.save(folded, str(path))
        if folding_record is not None and path == export.anchored_path:
            write_json(folding_record, record)


def _pack(export: AnchoredExport, label: str, packing_record: Path | None) -> AnchoredExport:
    """Rewrite both graphs of a module with several inputs to take them packed."""
    import onnx

    from anpred.interchange.input_shapes import graph_inputs
    from anpred.interchange.packing import PACKED_MODEL_INPUT, pack_graph_inputs, packed_size
    from anpred.store.files import write_json

    packing = None
    for path in (export.anchored_path, export.plain_path):
        model = onnx.load(str(path))
        found = pack_graph_inputs(model, graph_inputs(model), label)
        if packing is not None and found != packing:
            raise AssertionError("the anchored and plain graphs pack their inputs differently")
        packing = found
        onnx.save(model, str(path))
    assert packing is not None
    if packing_record is not None:  # the record a user's ONNX file with several inputs has
        size = packed_size(packing)
        tensors = [t.to_dict() for t in packing]
        record = {"input": PACKED_MODEL_INPUT, "dtype": "float32", "size": size, "tensors": tensors}
        write_json(packing_record, record)
    return replace(export, input_name=PACKED_MODEL_INPUT, input_shape=(packed_size(packing),))


def export_user_module(
    source: str,
    folder: Path,
    granularity: str = "stage",
    anchor_modules: Sequence[str] = (),
    seed: int = 0,
    input_shapes: Mapping[str | None, tuple[int, ...]] | None = None,
    packing_record: Path | None = None,
    opset: int = DEFAULT_OPSET,
    folding_record: Path | None = None,
) -> AnchoredExport:
    """Export the module ``source`` names into ``folder`` (inside the run directory).

    Args:
        source: The module source (``file.py:function`` or ``file.pt``, absolute path).
        folder: Where the graphs, the module's state and its record go.
        granularity: ``stage`` or ``layer`` (when no module paths are given).
        anchor_modules: Module paths to use as anchors.
        seed: Seed torch has when the module is built (and of ``--input-shape`` examples).
        input_shapes: ``--input-shape`` values, for a module without example inputs.
        packing_record: Where to write how several inputs are packed.
        opset: ONNX opset.
        folding_record: Where to write what folding did to the anchored graph.

    Raises:
        UsageError: The module cannot be built, fails on its inputs, names no such anchor
            module, or cannot be exported (the message names the failing operation).
    """
    module, pairs, keywords = build_user_module(source, seed, input_shapes or {})
    record = save_state(module, folder, source, seed, pairs, keywords)
    names = [name for name, _ in pairs]
    tensors = tuple(t for _, t in pairs)
    by_name = names if keywords else ()
    plan = partial(module_plan, inputs=tensors, keywords=by_name)
    anchors = plan_anchors(module, plan, granularity, anchor_modules)
    label = source.rsplit("/", 1)[-1]
    try:
        export = export_anchored(
            module, anchors, tensors[0].shape, folder, opset,
            example=tensors, input_names=names, keywords=by_name,
        )  # fmt: skip
    except UsageError:
        raise
    except Exception as err:
        raise UsageError(f"{label} cannot be exported to ONNX: {_failing_operation(err)}") from None
    _fold(export, {name: tuple(t.shape) for name, t in pairs}, folding_record)
    if len(pairs) > 1:
        export = _pack(export, label, packing_record)
    else:
        export = replace(export, input_dtype=record.inputs[0].dtype)
    export = replace(export, weights_id=record.weights_id)
    (folder / "export.json").write_text(json.dumps(export.to_dict(), indent=1))
    return export
