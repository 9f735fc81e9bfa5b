"""Capture overhead per library: anchored vs plain inference, and stage isolation vs anchored.

For each library, one fresh worker process (never two DL libraries in one process) builds
the library's runner exactly as ``anpred run`` does
(``runner_class(library).for_job(job)(settings)``, default configuration, ``anpred run``'s
worker environment), activates it on the anchored
export of the model and times, on the same input, after warm-up:

* ``plain``    — ``runner.infer_plain``: the model with only its final output;
* ``anchored`` — ``runner.infer``: every anchor exposed and copied out as NumPy arrays;
* ``isolate``  — ``runner.isolate``: stage isolation, fed with the fp64 reference's anchors
  rounded to float32 (produced first by the torch runner in float64, as in a run).

The three calls are interleaved in each repetition (rotating their order) so that slow
drift of the machine hits them alike; each cell is the median over the repetitions, and
ratios are taken between medians of the same process. Targets: anchored/plain small,
isolate/anchored ≤ 1.5×. Run::

    python benchmarks/bench_capture.py            # full: 20 repetitions, 3 warm-up
    python benchmarks/bench_capture.py --quick    # CI smoke: 3 repetitions, 1 warm-up
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from workload import machine_note, markdown_table, median_ms, prepare_workload, run_child

SCRIPT = Path(__file__).resolve()
#: Isolation may cost at most this much more than anchored inference.
ISOLATION_TARGET = 1.5


def _measure(job: dict[str, Any]) -> dict[str, Any]:
    """Child process: time one library's runner (see the module docstring)."""
    import numpy as np

    from anpred.backends.base import ModelJob
    from anpred.backends.registry import runner_class

    start = time.perf_counter()
    model = ModelJob.from_dict(job["model"])
    runner = runner_class(job["library"]).for_job(model)(job["settings"])
    imported = time.perf_counter() - start
    runner.activate(model)
    with np.load(job["inputs"]) as data:
        feed = data[job["input_id"]]
    if job["mode"] == "reference":
        capture = runner.infer(feed)
        np.savez(job["reference"], **capture.arrays)
        return {"anchors": len(capture.arrays)}
    with np.load(job["reference"]) as data:
        fed = {key: data[key].astype(np.float32) for key in data.files}
    calls = {
        "plain": lambda: runner.infer_plain(feed),
        "anchored": lambda: runner.infer(feed),
        "isolate": lambda: runner.isolate(feed, fed),
    }
    for _ in range(job["warmup"]):
        for call in calls.values():
            call()
    names = list(calls)
    seconds: dict[str, list[float]] = {name: [] for name in names}
    for rep in range(job["reps"]):
        for name in names[rep % 3 :] + names[: rep % 3]:
            begin = time.perf_counter()
            calls[name]()
            seconds[name].append(time.perf_counter() - begin)
    anchor_bytes = sum(a.nbytes for a in runner.infer(feed).arrays.values())
    return {
        "library": job["library"],
        "version": runner.version(),
        "seconds": seconds,
        "import_s": imported,
        "activate_s": runner.timings.get("load"),
        "anchor_mb": anchor_bytes / 1e6,
        "settings": runner.describe_settings(),
    }


def _iqr(numerator: list[float], denominator: list[float]) -> str:
    """Interquartile range of the per-repetition ratios, as ``low–high``."""
    ratios = [a / b for a, b in zip(numerator, denominator, strict=True)]
    if len(ratios) < 4:
        return f"{min(ratios):.2f}–{max(ratios):.2f}"
    q1, _, q3 = statistics.quantiles(ratios, n=4)
    return f"{q1:.2f}–{q3:.2f}"


def _child(job_path: str) -> int:
    job = json.loads(Path(job_path).read_text())
    print(json.dumps(_measure(job)), flush=True)
    return 0


def main() -> int:
    """Prepare the workload, run one worker per library, print the Markdown tables."""
    from anpred.execution.pool import worker_env
    from anpred.participants import DEFAULT_LIBRARIES, is_available

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="yolov8n", help="zoo model or .onnx path")
    parser.add_argument("--libs", default="all", help="comma-separated libraries (default all)")
    parser.add_argument("--quick", action="store_true", help="3 repetitions, 1 warm-up")
    parser.add_argument("--reps", type=int, help="timed repetitions (default 20; quick 3)")
    parser.add_argument("--warmup", type=int, help="warm-up calls (default 3; quick 1)")
    parser.add_argument(
        "--threads",
        type=int,
        default=1,
        help="thread variables of the worker environment, as `anpred run "
        "--threads` sets them (default 1)",
    )
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temp folder)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return _child(args.child)
    reps = args.reps or (3 if args.quick else 20)
    warmup = args.warmup if args.warmup is not None else (1 if args.quick else 3)
    libraries = (
        [lib for lib in DEFAULT_LIBRARIES if is_available(lib)]
        if args.libs == "all"
        else args.libs.split(",")
    )
    work = args.work or Path(tempfile.mkdtemp(prefix="anpred-bench-capture-"))
    say = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    workload = prepare_workload(args.model, 1, work, say)
    env = worker_env(args.threads)
    base = {
        "model": workload.job,
        "inputs": str(workload.inputs),
        "input_id": workload.input_ids[0],
        "reference": str(work / "reference64.npz"),
        "reps": reps,
        "warmup": warmup,
    }

    def child(name: str, job: dict[str, Any]) -> dict[str, Any]:
        path = work / f"job-{name}.json"
        path.write_text(json.dumps({**base, **job}))
        return run_child(SCRIPT, ["--child", str(path)], env)[0]

    say("fp64 reference anchors (torch runner, float64)")
    child("reference", {"library": "torch", "settings": {"dtype": "float64"}, "mode": "reference"})
    results = []
    for library in libraries:
        say(f"{library}: {warmup} warm-up + {reps} timed repetitions")
        # default configuration, as `anpred run` passes it (threads reach it via worker_env)
        results.append(child(library, {"library": library, "settings": {}, "mode": "time"}))
    rows = []
    for r in results:
        sec = r["seconds"]
        plain, anchored, isolate = (median_ms(sec[k]) for k in ("plain", "anchored", "isolate"))
        rows.append(
            [
                r["library"],
                r["version"].split("-")[0],
                f"{plain:.1f}",
                f"{anchored:.1f}",
                f"{anchored / plain:.3f}",
                _iqr(sec["anchored"], sec["plain"]),
                f"{isolate:.1f}",
                f"{isolate / anchored:.3f}",
                _iqr(sec["isolate"], sec["anchored"]),
                f"{r['anchor_mb']:.1f}",
            ]
        )
    print(
        f"## Capture overhead — {args.model}, input {workload.input_ids[0]!r}, "
        f"{args.threads} thread(s), median of {reps} after {warmup} warm-up\n"
    )
    print(f"{machine_note()}\n")
    print(
        markdown_table(
            [
                "library",
                "version",
                "plain ms",
                "anchored ms",
                "anchored/plain",
                "(IQR)",
                "isolate ms",
                "isolate/anchored",
                "(IQR)",
                "anchors MB",
            ],
            rows,
        )
    )
    print(
        "\nRatios are between medians; (IQR) is the interquartile range of the same ratio "
        "taken per repetition (the calls of one repetition run back to back), a measure of "
        "the noise."
    )
    worst = max((float(r[7]) for r in rows), default=float("nan"))
    verdict = "meets" if worst <= ISOLATION_TARGET else "misses"
    print(
        f"\nStage isolation: worst isolate/anchored {worst:.2f}× ({verdict} the "
        f"≤ {ISOLATION_TARGET}× target)."
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {"model": args.model, "reps": reps, "warmup": warmup, "results": results}, indent=1
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
