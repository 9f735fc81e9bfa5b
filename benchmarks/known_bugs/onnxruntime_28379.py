"""onnxruntime PR #28379: CPU Attention applies the additive mask before the softcap.

https://github.com/microsoft/onnxruntime/pull/28379 (onnx/onnx#7867, #7913; buggy 1.25.1,
fixed 1.28.0). ONNX's ``Attention`` (opset 23+) caps the scaled QK^T scores
(``softcap * tanh(s / softcap)``) and then adds ``attn_mask``; the CPU kernel added the mask
first, so a float mask (a relative-position bias, as in Gemma-2-style models) is squashed by
the tanh. Prints the relative L2 against a float64 NumPy reference of the spec's order;
exits 0 when the bug shows (relative L2 > 1e-3), 1 otherwise.
"""

from __future__ import annotations

import sys

import numpy as np
import onnxruntime as ort
from onnx import TensorProto, helper

THRESHOLD = 1e-3  # fp32 attention here: ~1e-7; the bug: ~0.4
B, H, S, D, CAP = 1, 2, 8, 16, 5.0


def model() -> bytes:
    """One Attention (opset 23) with a float mask and softcap 5."""
    node = helper.make_node("Attention", ["q", "k", "v", "m"], ["y"], softcap=CAP)
    shapes = {"q": [B, H, S, D], "k": [B, H, S, D], "v": [B, H, S, D], "m": [S, S]}
    graph = helper.make_graph(
        [node], "attention_softcap",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in shapes.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )  # fmt: skip
    m = helper.make_model(graph, opset_imports=[helper.make_operatorsetid("", 23)])
    m.ir_version = 10
    return m.SerializeToString()


def main() -> int:
    """Run the buggy case; exit 0 when the bug shows."""
    rng = np.random.default_rng(0)
    q, k = (rng.standard_normal((B, H, S, D)).astype(np.float32) * 2 for _ in range(2))
    v = rng.standard_normal((B, H, S, D)).astype(np.float32)
    mask = (rng.standard_normal((S, S)) * 3).astype(np.float32)
    sess = ort.InferenceSession(model(), providers=["CPUExecutionProvider"])
    y = sess.run(None, {"q": q, "k": k, "v": v, "m": mask})[0].astype(np.float64)
    s = q.astype(np.float64) @ k.astype(np.float64).transpose(0, 1, 3, 2) / np.sqrt(D)
    logits = np.tanh(s / CAP) * CAP + mask
    p = np.exp(logits - logits.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
    rel = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
    print(f"onnxruntime {ort.__version__}: Attention(softcap=5, float mask), rel L2 vs fp64 "
          f"(softcap, then mask): {rel:.3g}")  # fmt: skip
    print(f"RESULT {rel:.3g}")
    return 0 if rel > THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
