"""PyTorch #169688: bf16 Conv3d wrong on AMX CPUs when the last output dim is 1 and strided.

https://github.com/pytorch/pytorch/issues/169688 (fix proposed in PR #188426, open). On
CPUs with AMX-BF16, oneDNN's brgemm bf16 Conv3d (``brg_conv_fwd:avx10_1_512_amx``, oneDNN
3.12 in torch 2.14.1) returns garbage when ``out_w == 1`` and ``stride_w > 1``; torch 2.0.1
(oneDNN 2.7) is correct: a regression. Needs AMX. Prints the relative L2 against a
float64 reference of the same bf16 inputs; exits 0 when the bug shows (rel L2 > 1e-1),
1 otherwise.
"""

from __future__ import annotations

import sys

import numpy as np
import torch

THRESHOLD = 1e-1  # one bf16 rounding of the output: ~2e-3; the bug: 1e30 and up


def main() -> int:
    """Run the buggy case; exit 0 when the bug shows."""
    torch.manual_seed(0)
    x = torch.randn(1, 16, 9, 9, 3).bfloat16()
    w = torch.randn(8, 16, 3, 3, 3).bfloat16()
    ref = torch.nn.functional.conv3d(x.double(), w.double(), stride=(1, 1, 3)).numpy()
    y = torch.nn.functional.conv3d(x, w, stride=(1, 1, 3)).double().numpy()
    rel = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
    ok = torch.nn.functional.conv3d(x, w, stride=(1, 1, 1)).double().numpy()
    ref_ok = torch.nn.functional.conv3d(x.double(), w.double(), stride=(1, 1, 1)).numpy()
    rel_ok = float(np.linalg.norm(ok - ref_ok) / np.linalg.norm(ref_ok))
    print(f"torch {torch.__version__}: bf16 conv3d, output (7, 7, 1) with stride_w 3, rel L2 vs "
          f"fp64: {rel:.3g} (unit stride, output (7, 7, 1): {rel_ok:.3g})")  # fmt: skip
    print(f"RESULT {rel:.3g}")
    return 0 if rel > THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
