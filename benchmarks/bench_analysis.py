"""Throughput of the analysis core on one core: MB of aligned anchor data analysed per second.

The **verdict path** is what every (anchor, input) costs by default: the oracle's phase 1 and
2 with the primary metric alone (the corroborating metrics are computed only where the
oracle has a candidate, ``OracleParams.metrics_scope``); printed as ``verdict path: N MB/s
per CPU s``. Beside it: every metric everywhere (``anpred run --metrics all``), and what the
corroborating metrics add at a candidate (anchor, input), measured on the same captures
with a fault in one participant (every cell then a candidate).

Synthetic captures with yolov8n-like anchor shapes (640x640 input) for six participants:
the fp32 reference and five participants whose captures differ from it by fp32-sized
noise, plus the fp64 reference. "Aligned anchor data" counts the participants' aligned
captures as float64 (6 x 8 bytes per element), though they reach the kernel as the float32
arrays they are (as a run's analysis passes them; the float64 copies are timed too); the
fp64 reference is read but not counted.
Generating the captures is not timed. Alignment (a float32 NHWC capture to NCHW float64)
is timed separately. Phase 1 runs the kernel's compiled loops when numba is installed
(``ANPRED_NO_JIT=1``: its NumPy path); both paths are also timed against each other,
interleaved. ``--generic`` times the same data through the generic per-metric
path as well (each metric on its own through the registry, as before the one-pass kernel
of :mod:`anpred.analysis.onepass`) and prints the ratio of the two, measured in one run.
The capture readers (CRC-checked ``np.load``, ``np.fromfile`` of the stored member, the view
of the mapped member the analysis uses; each with one pass over the data) and the Polygraphy
baseline (``np.median`` vs one selection) are timed against each other, interleaved.
Run::

    python benchmarks/bench_analysis.py [--inputs 3] [--generic]
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # one core; must be set before numpy is imported

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402

from anpred.analysis import (  # noqa: E402
    OracleParams,
    align,
    assess,
    baselines,
    judge_anchor,
    onepass,
    oracle,
    polygraphy_allclose,
)
from anpred.analysis.metrics import (  # noqa: E402
    channel_moment_difference,
    channel_moments,
    get_metric,
    metric_names,
)
from anpred.store import files  # noqa: E402
from anpred.store.files import CaptureFile, load_npz, read_array, write_arrays  # noqa: E402

ANCHOR_SHAPES = {
    "model.0": (1, 16, 320, 320),
    "model.1": (1, 32, 160, 160),
    "model.3": (1, 64, 80, 80),
    "model.5": (1, 128, 40, 40),
    "model.7": (1, 256, 20, 20),
    "output": (1, 84, 8400),
}
PARTICIPANTS = ("torch", "onnxruntime", "openvino", "tensorflow", "jax", "paddle")


FAULT = 1e-4
"""Relative error of the faulty participant (``paddle``) of :func:`synthetic_captures` with
``faulty=True``: ~1000 times the others' noise, so every (anchor, input) is a candidate."""


def synthetic_captures(shape: tuple[int, ...], seed: int, faulty: bool = False):
    """fp64 reference and six float32-valued captures within ~1e-7 relative of it (the last
    one :data:`FAULT` off when ``faulty``).
    """
    rng = np.random.default_rng(seed)
    fp64 = rng.standard_normal(shape) * rng.uniform(0.5, 2.0)
    captures = {}
    for k, participant in enumerate(PARTICIPANTS):
        noise = 0.0 if k == 0 else 1e-7 * rng.standard_normal(shape)
        if faulty and k == len(PARTICIPANTS) - 1:
            noise = noise + FAULT * rng.choice([-1.0, 1.0], size=shape)
        captures[participant] = (fp64 * (1 + noise)).astype(np.float32).astype(np.float64)
    return captures, fp64


def time_assess(
    inputs: int,
    narrow: bool = True,
    params: OracleParams | None = None,
    faulty: bool = False,
    per_metric: bool = True,
) -> tuple[float, float, float, float, dict[str, float]]:
    """Phase 1 and 2 over every anchor: (MB, wall s of assess, of judge, CPU s, per metric).

    ``narrow``: the captures reach ``assess`` as float32 arrays, as a run's analysis passes
    them when the compiled loops are used (else as float64 copies). MB counts 8 bytes per
    element either way. ``params``: the oracle's (default: the verdict path); ``faulty``:
    one participant off by :data:`FAULT`; ``per_metric``: also time each metric alone on
    one pair (not counted in the CPU seconds).
    """
    analysed_bytes = 0
    assess_seconds = judge_seconds = cpu_seconds = 0.0
    metric_seconds = dict.fromkeys(metric_names(), 0.0)
    for anchor, shape in ANCHOR_SHAPES.items():
        evidence = []
        for i in range(inputs):
            captures, fp64 = synthetic_captures(shape, seed=i, faulty=faulty)
            given = {p: x.astype(np.float32) for p, x in captures.items()} if narrow else captures
            start, cpu_start = time.perf_counter(), time.process_time()
            evidence.append(assess(anchor, str(i), given, given["torch"], fp64, params=params))
            assess_seconds += time.perf_counter() - start
            cpu_seconds += time.process_time() - cpu_start
            analysed_bytes += sum(x.nbytes for x in captures.values())
            if i == 0 and per_metric:  # where the time goes: each metric alone on one pair
                for name in metric_seconds:
                    start = time.perf_counter()
                    get_metric(name)(captures["onnxruntime"], fp64)
                    metric_seconds[name] += time.perf_counter() - start
        start, cpu_start = time.perf_counter(), time.process_time()
        verdicts = judge_anchor(evidence, params)
        judge_seconds += time.perf_counter() - start
        cpu_seconds += time.process_time() - cpu_start
        if any(v.finding for v in verdicts) != faulty:  # the benchmark measures what it says
            raise AssertionError(f"{anchor}: findings {faulty=} expected")
    return analysed_bytes / 1e6, assess_seconds, judge_seconds, cpu_seconds, metric_seconds


def time_phases() -> dict[str, float]:
    """CPU seconds of each step of the one-pass kernel, all anchors, one input."""
    steps: dict[str, float] = {}

    def timed(step, function, *args):
        start = time.process_time()
        result = function(*args)
        steps[step] = steps.get(step, 0.0) + time.process_time() - start
        return result

    for shape in ANCHOR_SHAPES.values():
        captures, fp64 = synthetic_captures(shape, seed=0)
        narrow, exact, norms, consensus, reference_squares = timed(
            "first pass (float32, norms, consensus)", onepass._first_pass, captures, fp64
        )
        tables = ({p: {} for p in captures}, {p: {} for p in captures}, {})
        timed(
            "rel_l2 + max_abs + max_ulp + cosine",
            onepass._elementwise,
            list(onepass.ELEMENTWISE), captures, narrow, norms, consensus, reference_squares,
            fp64, *tables,
        )  # fmt: skip
        timed("wasserstein (sorts included)", onepass._wasserstein,
              captures, narrow, exact, fp64, *tables)  # fmt: skip
        timed("channel_moments", onepass._distributional, "channel_moments",
              channel_moments, channel_moment_difference, captures, fp64, *tables)  # fmt: skip
    return steps


def time_compiled_steps(rounds: int = 3) -> dict[str, float] | None:
    """CPU seconds per input of each compiled loop of the one-pass kernel (each entry point
    of :mod:`anpred.analysis.compiled` timed where ``measure_anchor`` calls it), and of the
    rest of the kernel (norms, channel moments, Python). All anchors, ``rounds`` times.
    ``None`` without numba.
    """
    loops = onepass.kernels()
    if loops is None:
        return None
    metrics = [get_metric(n) for n in metric_names()]
    data = [synthetic_captures(shape, seed=0) for shape in ANCHOR_SHAPES.values()]
    onepass.measure_anchor(metrics, *data[0])  # loaded before timing
    steps: dict[str, float] = {k.__name__: 0.0 for k in loops.KERNELS}
    originals = {name: getattr(loops, name) for name in steps}

    def timer(name, function):
        def timed(*args):
            start = time.process_time()
            result = function(*args)
            steps[name] += (time.process_time() - start) / rounds
            return result

        return timed

    total = 0.0
    try:
        for name, function in originals.items():
            setattr(loops, name, timer(name, function))
        for _ in range(rounds):
            start = time.process_time()
            for captures, fp64 in data:
                onepass.measure_anchor(metrics, captures, fp64)
            total += (time.process_time() - start) / rounds
    finally:
        for name, function in originals.items():
            setattr(loops, name, function)
    steps = {name: seconds for name, seconds in steps.items() if seconds > 0}
    steps["the rest (norms, channel moments, Python)"] = total - sum(steps.values())
    return steps


def time_paths(rounds: int = 3) -> dict[str, float] | None:
    """CPU seconds per input of the one-pass kernel on its two paths, interleaved.

    ``compiled``: the numba loops (:mod:`anpred.analysis.compiled`); ``numpy``: the NumPy
    blocks (``onepass.use_compiled(False)``). All anchors, one input, ``rounds`` times
    each. ``None`` without numba.
    """
    if onepass.kernels() is None:
        return None
    metrics = [get_metric(n) for n in metric_names()]
    data = [synthetic_captures(shape, seed=0) for shape in ANCHOR_SHAPES.values()]
    times = {"compiled": 0.0, "numpy": 0.0}
    for _ in range(rounds):
        for path in times:
            previous = onepass.use_compiled(path == "compiled")
            start = time.process_time()
            for captures, fp64 in data:
                onepass.measure_anchor(metrics, captures, fp64)
            times[path] += (time.process_time() - start) / rounds
            onepass.use_compiled(previous)
    return times


def _read_copied(opened, key: str, npz) -> np.ndarray:
    """The stored member's ``.npy`` read with ``np.fromfile`` (a copy; no CRC)."""
    with open(npz, "rb") as file:
        start, _ = files._member(opened, key, file)
        file.seek(start)
        return np.lib.format.read_array(file, allow_pickle=False)


def time_side_paths(rounds: int = 3) -> dict[str, dict[str, float]]:
    """CPU seconds of the capture readers and of the Polygraphy baseline, interleaved.

    Readers, each followed by one pass over the data (a sum), so that a view's page faults
    are counted where its data is first used: ``np.load`` (CRC-checked, the oldest),
    ``np.fromfile`` of the stored member (the reader before the mapping) and the view of
    the mapped member (:class:`CaptureFile`, what the analysis reads). Baseline:
    ``np.median`` vs the one-selection median. All on every anchor's float32 captures (six
    participants, one input), written with :func:`write_arrays` once.
    """
    import tempfile
    from pathlib import Path

    arrays = {a: synthetic_captures(s, seed=0) for a, s in ANCHOR_SHAPES.items()}
    narrow = {a: {p: x.astype(np.float32) for p, x in c.items()} for a, (c, _) in arrays.items()}
    readers = {
        "np.load (zip CRC)": lambda capture, opened, npz, key: read_array(opened, key, npz),
        "np.fromfile": lambda capture, opened, npz, key: _read_copied(opened, key, npz),
        "mapped view": lambda capture, opened, npz, key: capture[key],
    }
    times = {"read captures": dict.fromkeys(readers, 0.0)}
    times["polygraphy_allclose"] = {"np.median": 0.0, "one selection": 0.0}
    new_median = baselines._magnitude_median
    with tempfile.TemporaryDirectory() as folder:
        npz, meta = Path(folder) / "c.npz", Path(folder) / "c.json"
        write_arrays(npz, {f"{a}-{p}": x for a, c in narrow.items() for p, x in c.items()})
        meta.write_text("{}")
        for _ in range(rounds):
            for name, read in readers.items():
                with CaptureFile(npz, meta) as capture, load_npz(npz) as opened:
                    start = time.process_time()
                    for key in capture.keys():
                        np.add.reduce(read(capture, opened, npz, key), axis=None)
                    times["read captures"][name] += time.process_time() - start
            for name in times["polygraphy_allclose"]:
                old = name == "np.median"
                old_median = lambda v, largest: float(np.median(v))  # noqa: E731
                baselines._magnitude_median = old_median if old else new_median
                start = time.process_time()
                for captures, fp64 in arrays.values():
                    polygraphy_allclose(captures, captures["torch"], fp64)
                times["polygraphy_allclose"][name] += time.process_time() - start
        baselines._magnitude_median = new_median
    return {step: {k: v / rounds for k, v in ways.items()} for step, ways in times.items()}


def main() -> None:
    """Run the benchmark and print the throughput."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--inputs", type=int, default=3, help="inputs per anchor")
    parser.add_argument(
        "--generic", action="store_true", help="also time the generic per-metric path"
    )
    args = parser.parse_args()
    onepass.warm()  # numba's import and cached loops: a process's one-off cost, not timed
    everywhere = OracleParams(metrics_scope=oracle.METRICS_ALL)
    megabytes, assess_seconds, judge_seconds, cpu_seconds, per_metric = time_assess(args.inputs)
    total = assess_seconds + judge_seconds
    print(
        f"anchors: {len(ANCHOR_SHAPES)}  participants: {len(PARTICIPANTS)}  inputs: {args.inputs}"
    )
    print(f"aligned anchor data analysed: {megabytes:.0f} MB (float64)")
    print("verdict path (the primary metric at every cell; no candidate in these captures):")
    print(
        f"  phase 1 (assess): {assess_seconds:.2f} s   phase 2 (judge): "
        f"{judge_seconds * 1e3:.1f} ms   {megabytes / total:.1f} MB/s wall clock on one core"
    )
    print(f"verdict path: {megabytes / cpu_seconds:.0f} MB/s per CPU s")
    # interleaved: every metric everywhere, a fault in every cell, the verdict path again
    *_, all_cpu, _ = time_assess(args.inputs, params=everywhere, per_metric=False)
    *_, candidate_cpu, _ = time_assess(args.inputs, faulty=True, per_metric=False)
    *_, again_cpu, _ = time_assess(args.inputs, per_metric=False)
    verdict_cpu = (cpu_seconds + again_cpu) / 2
    cells = len(ANCHOR_SHAPES) * args.inputs
    print(
        f"every metric everywhere (--metrics all): {megabytes / all_cpu:.0f} MB/s per CPU s "
        f"({all_cpu / verdict_cpu:.2f}x the verdict path's CPU)"
    )
    print(
        f"corroborating metrics on candidates only: a candidate cell costs "
        f"{candidate_cpu / verdict_cpu:.2f}x a clean one "
        f"(+{(candidate_cpu - verdict_cpu) / args.inputs * 1e3:.0f} ms per input when every "
        f"anchor has a candidate; {megabytes / candidate_cpu:.0f} MB/s per CPU s there; "
        f"{cells} cells of each kind)"
    )
    *_, wide_cpu, _ = time_assess(args.inputs, narrow=False, per_metric=False)
    print(
        f"the same captures as float64 copies: {megabytes / wide_cpu:.1f} MB/s per CPU second "
        f"({wide_cpu / verdict_cpu:.2f}x the CPU of the float32 arrays the analysis passes)"
    )
    if args.generic:
        oracle.measure_anchor = onepass.measure_generic  # the per-metric path
        try:
            *_, generic_cpu, _ = time_assess(args.inputs, params=everywhere)
        finally:
            oracle.measure_anchor = onepass.measure_anchor
        print(
            f"generic per-metric path, every metric: {megabytes / generic_cpu:.1f} MB/s per CPU "
            f"second; one pass is {generic_cpu / all_cpu:.2f}x faster (CPU)"
        )
    paths = time_paths()
    if paths is None:
        print("one-pass kernel: NumPy path (numba is not installed)")
    else:
        compiled, numpy_path = paths["compiled"], paths["numpy"]
        print(
            f"one-pass kernel, every metric, all anchors, one input: compiled "
            f"{compiled * 1e3:.0f} ms, "
            f"NumPy path {numpy_path * 1e3:.0f} ms ({numpy_path / compiled:.2f}x, CPU, interleaved)"
        )
    steps = time_compiled_steps()
    if steps is not None:
        print("one-pass kernel, every metric, compiled path, all anchors, one input (CPU ms):")
        for step, seconds in steps.items():
            print(f"  {step:40s} {seconds * 1e3:7.1f}")
    print("one-pass kernel, every metric, NumPy path, all anchors, one input (CPU ms):")
    for step, seconds in time_phases().items():
        print(f"  {step:40s} {seconds * 1e3:7.1f}")
    print("generic path: one metric on one pair, all anchors, one input:")
    for name, seconds in per_metric.items():
        print(f"  {name:16s} {seconds * 1e3:7.1f} ms")

    print("reader and baseline, all anchors, one input, interleaved (CPU ms; last: in use):")
    for step, ways in time_side_paths().items():
        used = list(ways.values())[-1]
        timed = "  ".join(f"{way} {t * 1e3:.1f} ({t / used:.2f}x)" for way, t in ways.items())
        print(f"  {step:20s} {timed}")

    capture, _ = synthetic_captures(ANCHOR_SHAPES["model.0"], seed=0)
    nhwc = capture["tensorflow"].astype(np.float32).transpose(0, 2, 3, 1)
    start = time.perf_counter()
    align(nhwc, ANCHOR_SHAPES["model.0"], "NHWC")
    seconds = time.perf_counter() - start
    print(f"alignment (float32 NHWC -> float64 NCHW): {nhwc.size * 8 / 1e6 / seconds:.0f} MB/s")


if __name__ == "__main__":
    main()
