"""PyTorch #83863 / #95125: bf16 matmul on CPU without oneDNN accumulates in bf16.

https://github.com/pytorch/pytorch/issues/83863 (and #95125; buggy 2.0.1, fixed 2.1.0).
With ``torch.backends.mkldnn`` disabled, the CPU bf16 GEMM fallback keeps its running sum
in bf16: ``ones(1024) @ ones(1024)`` gives 256 (once the sum reaches 256, adding 1 no
longer changes a bf16), and a random 512x2048x512 matmul is ~30x further from the exact
result than a float-accumulating kernel. Prints the relative L2 against a float64
reference of the same bf16 inputs; exits 0 when the bug shows (rel L2 > 1e-2), 1 otherwise.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

THRESHOLD = 1e-2  # fp32 accumulation then one bf16 rounding: ~1.7e-3; the bug: ~5e-2


def main() -> int:
    """Run the buggy case; exit 0 when the bug shows."""
    torch.manual_seed(0)
    a = torch.randn(512, 2048).to(torch.bfloat16)
    b = torch.randn(2048, 512).to(torch.bfloat16)
    ref = a.double().numpy() @ b.double().numpy()
    ones = torch.ones(1024, dtype=torch.bfloat16)
    with torch.backends.mkldnn.flags(enabled=False):
        dot = float(ones @ ones)
        out = (a @ b).double().numpy()
    with_mkldnn = (a @ b).double().numpy()
    rel = float(np.linalg.norm(out - ref) / np.linalg.norm(ref))
    rel_on = float(np.linalg.norm(with_mkldnn - ref) / np.linalg.norm(ref))
    print(f"torch {torch.__version__}: bf16 matmul 512x2048x512 rel L2 vs fp64: "
          f"mkldnn off {rel:.3g}, on {rel_on:.3g}; ones(1024)@ones(1024) = {dot:g}")  # fmt: skip
    print(f"RESULT {rel:.3g}")
    return 0 if rel > THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
