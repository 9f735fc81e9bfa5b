"""ncnn #4578: x86 ``Scale`` without an elempack-16 path on AVX-512 CPUs.

https://github.com/Tencent/ncnn/issues/4578 (buggy 1.0.20230223, fixed 1.0.20230517).
A 1x1 convolution with 32 output channels (packed 16 at a time on AVX-512) followed by a
per-channel scale + bias: the buggy ``Scale_x86`` treats the elempack-16 blob as
elempack 8/4 and applies the wrong channel's scale. Prints the relative L2 against a
float64 NumPy reference; exits 0 when the bug shows (relative L2 > 1e-3), 1 otherwise.
"""

from __future__ import annotations

import os
import sys
import tempfile

import ncnn
import numpy as np

THRESHOLD = 1e-3  # fp32 here is ~1e-7 rel L2; the bug gives ~0.5


def build(folder: str, w: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> tuple[str, str]:
    """An ncnn param/bin pair: Input -> Convolution 1x1 (no bias) -> Scale (with bias)."""
    cout, cin = w.shape
    param = os.path.join(folder, "m.param")
    binf = os.path.join(folder, "m.bin")
    with open(param, "w") as f:
        f.write("7767517\n3 3\n")
        f.write(f"Input in0 0 1 in0 0=8 1=8 2={cin}\n")
        f.write(f"Convolution conv 1 1 in0 c0 0={cout} 1=1 5=0 6={cout * cin}\n")
        f.write(f"Scale scale 1 1 c0 out0 0={cout} 1=1\n")
    with open(binf, "wb") as f:
        f.write(np.zeros(1, np.uint32).tobytes())  # conv weight flag: raw fp32
        f.write(w.astype(np.float32).tobytes())
        f.write(scale.astype(np.float32).tobytes())
        f.write(bias.astype(np.float32).tobytes())
    return param, binf


def main() -> int:
    """Run the buggy case; exit 0 when the bug shows."""
    rng = np.random.default_rng(0)
    cin, cout = 16, 32
    x = rng.standard_normal((cin, 8, 8)).astype(np.float32)
    w = rng.standard_normal((cout, cin)).astype(np.float32)
    scale = rng.uniform(0.5, 2.0, cout).astype(np.float32)
    bias = rng.standard_normal(cout).astype(np.float32)
    ref = np.einsum("oc,chw->ohw", w.astype(np.float64), x.astype(np.float64))
    ref = ref * scale[:, None, None] + bias[:, None, None]
    with tempfile.TemporaryDirectory() as folder:
        param, binf = build(folder, w, scale, bias)
        results = {}
        for packing in (False, True):
            net = ncnn.Net()
            net.opt.use_packing_layout = packing
            net.opt.num_threads = 1
            net.load_param(param)
            net.load_model(binf)
            ex = net.create_extractor()
            ex.input("in0", ncnn.Mat(x).clone())
            _, out = ex.extract("out0")
            y = np.array(out).astype(np.float64)
            results[packing] = float(np.linalg.norm(y - ref) / np.linalg.norm(ref))
    print(f"ncnn {ncnn.__version__}: conv1x1(32)+scale, rel L2 vs fp64: "
          f"packing on {results[True]:.3g}, packing off {results[False]:.3g}")  # fmt: skip
    print(f"RESULT {results[True]:.3g}")
    return 0 if results[True] > THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
