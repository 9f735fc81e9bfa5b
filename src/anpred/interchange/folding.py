"""Fold a user's ONNX graph's shape arithmetic once its input shapes are concrete.

Exports compute shapes at run time (``Shape → Gather → Concat → Reshape``, ``Range`` over a
``Shape``); once the input shape is fixed these are constants, and some libraries (jax,
XLA) need them to be. The folding is onnxslim's (a maintained simplifier), restricted to
constant folding and dead-node elimination: no fusion, no common-subexpression merging,
so every tensor the user's graph computes from the input keeps its name and its math.

The folded graph is accepted only when onnxruntime gives the same outputs on it as on the
original, within the file's own measured fp32 noise (see :func:`verify_folding`); otherwise
the original graph is kept and the record says why. Runs in the export worker (imports
onnxruntime).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx

#: onnxslim passes that change more than constants (kept off: anchors must survive as named).
_SKIPPED_PASSES = ["graph_fusion", "subexpression_elimination", "weight_tying"]
#: Tolerance, as a multiple of the measured noise (onnxruntime with all graph optimizations
#: vs none, on the original graph). Shape folding itself leaves float math untouched
#: (measured bit-identical on the corpus models, see the module's test), so any headroom is
#: for constant float subgraphs folded in float32 by another kernel.
NOISE_FACTOR = 4.0
#: Relative floor of the tolerance (of the output's largest magnitude): a graph ORT cannot
#: optimize has zero measured noise, and float32 rounding of a folded constant is ~6e-8 of it.
REL_FLOOR = 1e-6


def _session(model: onnx.ModelProto, optimized: bool) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = (
        ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        if optimized
        else ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    )
    options.log_severity_level = 3
    options.intra_op_num_threads = 1
    return ort.InferenceSession(
        model.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )


def probe_feeds(
    model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]], seed: int = 0
) -> dict[str, np.ndarray]:
    """Seeded inputs for checking a graph: standard normal floats, 0/1 for other types."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in model.graph.input:
        if vi.name not in shapes:
            continue
        dtype = onnx.helper.tensor_dtype_to_np_dtype(vi.type.tensor_type.elem_type)
        shape = tuple(shapes[vi.name])
        if np.issubdtype(dtype, np.floating):
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
        else:
            feeds[vi.name] = rng.integers(0, 2, shape).astype(dtype)
    return feeds


def verify_folding(
    original: onnx.ModelProto, folded: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]
) -> list[dict[str, Any]]:
    """Compare the folded graph's outputs with the original's on onnxruntime.

    The noise of each output is measured on the original itself: onnxruntime with every
    graph optimization (its own folding and fusions) against none. The folded graph, run
    without optimizations, passes an output when its max abs difference to the original is
    at most ``NOISE_FACTOR`` × that noise, or ``REL_FLOOR`` × the output's largest magnitude.

    Returns:
        One record per output: name, max_abs_diff, noise, tolerance, ok.
    """
    feeds = probe_feeds(original, shapes)
    reference = _session(original, False).run(None, feeds)
    optimized = _session(original, True).run(None, feeds)
    got = _session(folded, False).run(None, feeds)
    names = [o.name for o in original.graph.output]
    records = []
    for name, ref, opt, value in zip(names, reference, optimized, got, strict=True):
        ref64 = np.asarray(ref, np.float64)
        if np.shape(value) != np.shape(ref):
            records.append({"name": name, "ok": False, "reason": "shape changed"})
            continue
        diff = float(np.max(np.abs(np.asarray(value, np.float64) - ref64), initial=0.0))
        noise = float(np.max(np.abs(np.asarray(opt, np.float64) - ref64), initial=0.0))
        scale = float(np.max(np.abs(ref64), initial=0.0))
        tolerance = max(NOISE_FACTOR * noise, REL_FLOOR * scale)
        ok = bool(np.isfinite(diff) and diff <= tolerance) or bool(
            np.array_equal(value, ref, equal_nan=np.issubdtype(np.asarray(ref).dtype, np.floating))
        )
        records.append(
            {"name": name, "max_abs_diff": diff, "noise": noise, "tolerance": tolerance, "ok": ok}
        )
    return records


def fold_shapes(
    model: onnx.ModelProto, shapes: Mapping[str, Sequence[int]]
) -> tuple[onnx.ModelProto, dict[str, Any]]:
    """Fold constant shape arithmetic of ``model`` (inputs already fixed to ``shapes``).

    Returns:
        The graph to use (the folded one, or ``model`` when folding changed nothing, failed,
        or changed the outputs) and the record of what was folded and how it was checked.
    """
    record: dict[str, Any] = {"input_shapes": {k: list(v) for k, v in shapes.items()}}
    try:
        import onnxslim
    except ImportError:  # a pinned dependency; without it the graph runs unfolded
        record.update(used=False, reason="onnxslim is not installed")
        return model, record
    record = {
        "tool": f"onnxslim {onnxslim.__version__}",
        "passes": "constant folding, dead-node elimination",
        "input_shapes": {k: list(v) for k, v in shapes.items()},
        "nodes_before": len(model.graph.node),
    }
    try:
        source = onnx.ModelProto()
        source.CopyFrom(model)  # onnxslim edits the graph it is given
        folded = onnxslim.slim(
            source,
            skip_optimizations=_SKIPPED_PASSES,
            skip_fusion_patterns=list(_fusion_patterns()),
        )
        _initializers_as_inputs(folded)
    except Exception as err:  # the simplifier's own failure: keep the original graph
        record.update(used=False, reason=f"onnxslim failed: {' '.join(str(err).split())[:200]}")
        return model, record
    before = Counter(n.op_type for n in model.graph.node)
    after = Counter(n.op_type for n in folded.graph.node)
    record.update(
        nodes_after=len(folded.graph.node),
        removed_ops=dict(sorted((before - after).items())),
        added_ops=dict(sorted((after - before).items())),
    )
    if before == after:
        record.update(used=False, reason="nothing to fold")
        return model, record
    try:
        outputs = verify_folding(model, folded, shapes)
    except Exception as err:  # onnxruntime rejects the folded graph: keep the original
        record.update(used=False, reason=f"refused: {' '.join(str(err).split())[:200]}")
        return model, record
    record["outputs"] = outputs
    if not all(o["ok"] for o in outputs):
        bad = next(o for o in outputs if not o["ok"])
        record.update(used=False, reason=f"refused: output {bad['name']} changed ({bad})")
        return model, record
    record["used"] = True
    return folded, record


def _initializers_as_inputs(model: onnx.ModelProto) -> None:
    """IR version < 4 requires every initializer to be a graph input; onnxslim drops the
    inputs of the initializers it keeps or adds (seen on the onnx package's resnet50).
    """
    if model.ir_version >= 4:
        return
    listed = {i.name for i in model.graph.input}
    for init in model.graph.initializer:
        if init.name not in listed:
            model.graph.input.append(
                onnx.helper.make_tensor_value_info(init.name, init.data_type, list(init.dims))
            )


def _fusion_patterns() -> list[str]:
    from onnxslim.core.pattern.registry import DEFAULT_FUSION_PATTERNS

    return list(DEFAULT_FUSION_PATTERNS)
