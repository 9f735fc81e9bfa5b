"""Output mapping of converted artifacts (anpred.backends.output_map): order, shape, values."""

from __future__ import annotations

import numpy as np
import pytest

from anpred.backends.output_map import OutputMapError, fits, layouts_of, map_outputs

ANCHORS = [("a", (1, 4, 5, 6)), ("b", (1, 4, 5, 6)), ("c", (1, 3, 3, 3)), ("output", (1, 10))]


def _values() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {k: rng.standard_normal(s).astype(np.float32) for k, s in ANCHORS}


def test_layouts_follow_the_rank() -> None:
    assert layouts_of(4) == ["NCHW", "NHWC", "CHW", "HWC"]
    assert layouts_of(3) == ["NCW", "NWC", "CW", "WC"]
    assert layouts_of(2) == ["NC", "C"]
    assert fits((1, 80, 80, 16), (1, 16, 80, 80)) == ["NHWC"]
    assert fits((16, 80, 80), (1, 16, 80, 80)) == ["CHW"]
    assert fits((1, 8, 8, 8), (1, 8, 8, 8)) == ["NCHW", "NHWC"]  # square: shape can't tell
    assert fits((2, 80, 16), (2, 16, 80)) == ["NWC"]
    assert fits((16, 80), (2, 16, 80)) == []  # a batch of 2 cannot be dropped


def test_order_rule_with_channels_last_and_dropped_batch() -> None:
    values = _values()
    nhwc = [np.moveaxis(values[k], 1, -1) if values[k].ndim == 4 else values[k] for k, _ in ANCHORS]
    mapped = map_outputs(ANCHORS, nhwc)
    assert mapped.rule == "order"
    assert mapped.layouts() == {"a": "NHWC", "b": "NHWC", "c": "NHWC", "output": "NC"}
    # c (1,3,3,3) fits NCHW and NHWC: the other 4-D outputs' layout decides
    assert next(e for e in mapped.entries if e.anchor == "c").layout_by == "other outputs"
    got = mapped.apply(nhwc, dict(ANCHORS))
    assert all(np.array_equal(got[k], values[k]) for k in values)
    dropped = [values[k][0] for k, _ in ANCHORS]
    mapped = map_outputs(ANCHORS, dropped, names=["o0", "o1", "o2", "o3"])
    assert mapped.layouts() == {"a": "CHW", "b": "CHW", "c": "CHW", "output": "C"}
    assert mapped.to_dict()["outputs"][0]["name"] == "o0"
    assert all(np.array_equal(mapped.apply(dropped, dict(ANCHORS))[k], values[k]) for k in values)


def test_shape_then_values_decide_reordered_outputs() -> None:
    values = _values()
    raw = [values["output"], values["c"], values["b"], values["a"], np.zeros(3, np.float32)]
    mapped = map_outputs(ANCHORS, raw, reference=values)
    by_anchor = {e.anchor: e for e in mapped.entries}
    assert by_anchor["output"].decided_by == "shape" and by_anchor["c"].decided_by == "shape"
    assert by_anchor["a"].decided_by == "values" and by_anchor["a"].index == 3
    assert by_anchor["b"].index == 2 and mapped.rule == "values" and mapped.unused == [4]
    got = mapped.apply(raw, dict(ANCHORS))
    assert all(np.array_equal(got[k], values[k]) for k in values)
    # no reference values: same-shape anchors keep their relative order, and say so
    blind = map_outputs(ANCHORS, raw)
    assert blind.rule == "relative order"
    assert {e.anchor: e.index for e in blind.entries}["a"] == 2


def test_unmappable_outputs_and_changed_shapes_are_one_line_errors() -> None:
    values = _values()
    with pytest.raises(OutputMapError, match="anchor 'c' of shape"):
        map_outputs(ANCHORS, [values["a"], values["b"], values["output"]])
    raw = [values[k] for k, _ in ANCHORS]
    mapped = map_outputs(ANCHORS, raw)
    with pytest.raises(OutputMapError, match="shapes changed"):
        mapped.apply([r[..., :1] for r in raw], dict(ANCHORS))


def test_outputs_with_extra_unit_dimensions_are_reshaped() -> None:
    """MNN returns a Gemm's (1, 1280) as (1, 1280, 1, 1) (measured, MNN 3.6.1)."""
    gemm = np.arange(12, dtype=np.float32).reshape(1, 12)
    conv = np.ones((1, 12, 2, 2), np.float32)
    raw = [conv, gemm[..., None, None]]
    mapped = map_outputs([("conv", (1, 12, 2, 2)), ("gemm", (1, 12))], raw)
    assert mapped.layouts() == {"conv": "NCHW", "gemm": "unit dims"}
    got = mapped.apply(raw, {"conv": (1, 12, 2, 2), "gemm": (1, 12)})
    assert np.array_equal(got["gemm"], gemm)


def test_a_converters_known_layout_decides_a_square_tensor() -> None:
    # (1, 16, 16, 16): NCHW and NHWC fit alike; onnx2tf's outputs are channels last.
    rng = np.random.default_rng(0)
    nchw = rng.standard_normal((1, 16, 16, 16)).astype(np.float32)
    raw = [nchw.transpose(0, 2, 3, 1)]
    assumed = map_outputs([("r1", (1, 16, 16, 16))], raw)
    known = map_outputs([("r1", (1, 16, 16, 16))], raw, known={4: "NHWC"})
    assert assumed.entries[0].layout == "NCHW"  # nothing to tell them apart: assumed
    assert known.entries[0].layout == "NHWC" and known.entries[0].layout_by == "converter"
    assert np.array_equal(known.apply(raw, {"r1": (1, 16, 16, 16)})["r1"], nchw)
