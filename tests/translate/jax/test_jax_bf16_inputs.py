"""jax's bf16 mode on a packed input: integer tensors reach their ops exact, floats round.

A model's several inputs travel packed into one float32 vector
(:mod:`anpred.interchange.packing`); bfloat16 holds integers exactly only up to 256, so the
token ids of a language model must not be rounded with the float inputs.

This file imports one DL library: jax.
"""

from __future__ import annotations

import os

import numpy as np
import pytest

os.environ.setdefault("JAX_PLATFORMS", "cpu")
pytest.importorskip("jax")

import ml_dtypes  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from anpred.interchange.packing import pack, pack_graph_inputs  # noqa: E402
from anpred.translate.graph import GraphProgram  # noqa: E402
from anpred.translate.jax import make_adapter  # noqa: E402

#: Token ids above 256: bfloat16 (8 significant bits) rounds 257 to 256, 771 to 768, ...
IDS = np.array([[257, 513, 771, 999]], np.int64)


def _packed_model() -> tuple[object, np.ndarray]:
    """Gather(table, ids) and x * 1: rows of the table are ``row % 8`` (bf16-exact)."""
    table = np.repeat((np.arange(1000) % 8).astype(np.float32)[:, None], 3, axis=1)
    graph = helper.make_graph(
        [
            helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0),
            helper.make_node("Mul", ["x", "one"], ["scaled"]),
        ],
        "packed",
        [
            helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 4]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
        ],
        [
            helper.make_tensor_value_info("rows", TensorProto.FLOAT, [1, 4, 3]),
            helper.make_tensor_value_info("scaled", TensorProto.FLOAT, [1, 4]),
        ],
        [
            numpy_helper.from_array(table, "table"),
            numpy_helper.from_array(np.ones(1, np.float32), "one"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    tensors = pack_graph_inputs(model, list(model.graph.input), "test model")
    x = np.array([[1 + 2**-10, 3.0, -0.1, 300.5]], np.float32)
    return model, pack(tensors, {"ids": IDS, "x": x}, ["ids", "x"])


def test_bf16_mode_keeps_packed_ids_exact_and_rounds_floats() -> None:
    model, packed = _packed_model()
    adapter = make_adapter({"dtype": "bfloat16"})
    program = GraphProgram(model, adapter)
    out = {k: adapter.to_numpy(v) for k, v in program.run({"anpred.inputs": packed}).items()}
    # ids 257, 513, 771, 999 pick rows 1, 1, 3, 7; rounded to bf16 (256, 512, 768, 1000)
    # they would pick rows 0, 0, 0, 0
    np.testing.assert_array_equal(out["rows"][0, :, 0], IDS[0] % 8)
    # the float input still computes in bfloat16: x rounded once, 1 + 2**-10 becomes 1
    x = packed[4:].reshape(1, 4)
    np.testing.assert_array_equal(out["scaled"], x.astype(ml_dtypes.bfloat16).astype(np.float32))
    assert adapter.settings()["output_dtypes"] == ["bfloat16"]
