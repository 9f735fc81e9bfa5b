"""Throughput of the analysis core on one core: MB of aligned anchor data analysed per second.

Synthetic captures with yolov8n-like anchor shapes (640x640 input) for six participants:
the fp32 reference and five participants whose captures differ from it by fp32-sized
noise, plus the fp64 reference. "Aligned anchor data" counts the participants' aligned
float64 captures (6 x 8 bytes per element); the fp64 reference is read but not counted.
Generating the captures is not timed. Alignment (a float32 NHWC capture to NCHW float64)
is timed separately. Run::

    python benchmarks/bench_analysis.py [--inputs 3]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core; must be set before numpy is imported

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from anpred.analysis import align, assess, judge_anchor  # noqa: E402
from anpred.analysis.metrics import get_metric, metric_names  # noqa: E402

ANCHOR_SHAPES = {
    "model.0": (1, 16, 320, 320),
    "model.1": (1, 32, 160, 160),
    "model.3": (1, 64, 80, 80),
    "model.5": (1, 128, 40, 40),
    "model.7": (1, 256, 20, 20),
    "output": (1, 84, 8400),
}
PARTICIPANTS = ("torch", "onnxruntime", "openvino", "tensorflow", "jax", "paddle")


def synthetic_captures(shape: tuple[int, ...], seed: int):
    """fp64 reference and six float32-valued captures within ~1e-7 relative of it."""
    rng = np.random.default_rng(seed)
    fp64 = rng.standard_normal(shape) * rng.uniform(0.5, 2.0)
    captures = {}
    for k, participant in enumerate(PARTICIPANTS):
        noise = 0.0 if k == 0 else 1e-7 * rng.standard_normal(shape)
        captures[participant] = (fp64 * (1 + noise)).astype(np.float32).astype(np.float64)
    return captures, fp64


def main() -> None:
    """Run the benchmark and print the throughput."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=3, help="inputs per anchor")
    args = parser.parse_args()
    analysed_bytes = 0
    assess_seconds = judge_seconds = cpu_seconds = 0.0
    per_metric = dict.fromkeys(metric_names(), 0.0)
    for anchor, shape in ANCHOR_SHAPES.items():
        evidence = []
        for i in range(args.inputs):
            captures, fp64 = synthetic_captures(shape, seed=i)
            start, cpu_start = time.perf_counter(), time.process_time()
            evidence.append(assess(anchor, str(i), captures, captures["torch"], fp64))
            assess_seconds += time.perf_counter() - start
            cpu_seconds += time.process_time() - cpu_start
            analysed_bytes += sum(x.nbytes for x in captures.values())
            if i == 0:  # where the time goes: each metric alone on one participant pair
                for name in per_metric:
                    start = time.perf_counter()
                    get_metric(name)(captures["onnxruntime"], fp64)
                    per_metric[name] += time.perf_counter() - start
        start, cpu_start = time.perf_counter(), time.process_time()
        judge_anchor(evidence)
        judge_seconds += time.perf_counter() - start
        cpu_seconds += time.process_time() - cpu_start

    megabytes = analysed_bytes / 1e6
    total = assess_seconds + judge_seconds
    print(
        f"anchors: {len(ANCHOR_SHAPES)}  participants: {len(PARTICIPANTS)}  inputs: {args.inputs}"
    )
    print(f"aligned anchor data analysed: {megabytes:.0f} MB (float64)")
    print(
        f"phase 1 (assess): {assess_seconds:.2f} s   phase 2 (judge): {judge_seconds * 1e3:.1f} ms"
    )
    print(f"throughput: {megabytes / total:.1f} MB/s wall clock on one core")
    print(f"            {megabytes / cpu_seconds:.1f} MB/s per CPU second (robust to machine load)")
    print("one metric on one pair, all anchors, one input:")
    for name, seconds in per_metric.items():
        print(f"  {name:16s} {seconds * 1e3:7.1f} ms")

    capture, _ = synthetic_captures(ANCHOR_SHAPES["model.0"], seed=0)
    nhwc = capture["tensorflow"].astype(np.float32).transpose(0, 2, 3, 1)
    start = time.perf_counter()
    align(nhwc, ANCHOR_SHAPES["model.0"], "NHWC")
    seconds = time.perf_counter() - start
    print(f"alignment (float32 NHWC -> float64 NCHW): {nhwc.size * 8 / 1e6 / seconds:.0f} MB/s")


if __name__ == "__main__":
    main()
