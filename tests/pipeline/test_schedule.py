"""The order workers start in: the slower libraries first, results in the user's order."""

from __future__ import annotations

from anpred.participants import parse_participants
from anpred.pipeline.run import heavier_first


def test_translated_and_converted_libraries_start_before_onnx_loaders() -> None:
    given = parse_participants("onnxruntime,torch,jax,openvino,paddle,tensorflow[xla]")
    order = [p.name for p in heavier_first(given)]
    # translated graphs first, then the native module, then the ONNX loaders; the user's
    # order among equals
    assert order == ["jax", "paddle", "tensorflow[xla]", "torch", "onnxruntime", "openvino"]
    assert [p.name for p in given][0] == "onnxruntime"  # the caller's list is left alone
