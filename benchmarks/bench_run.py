"""End-to-end cost of ``anpred run`` against bare inference of the same inputs.

Two sides, timed from outside (process start, imports and exit included), same machine,
one after the other:

* **anpred**: ``python -m anpred run MODEL --libs LIBS --images N`` — everything: CLI
  start, export fetched from the cache (in a torch process), input preprocessing, the fp64
  reference worker, every participant's anchored + plain inference and stage isolation,
  compressed capture files, the analysis and the report.
* **bare**: for each library, one fresh process that imports the library, loads the model
  and runs plain inference on the same N preprocessed inputs, through the same runner
  ``anpred`` uses (``runner.infer_plain``; tensorflow/jax/paddle need anpred's translation
  to run the model at all; torch runs the native zoo module). The processes run one after
  the other; the side's time is their sum. The fp64 reference is anpred's own work and is
  not on the bare side.

Both sides use one fresh ``ANPRED_CACHE`` in which the weights and the anchored export
were generated beforehand (not timed), and the same threads per process. Before timing,
each library is imported once in a throw-away process so that neither side pays for a
cold OS file cache. ``anpred run`` runs ``--parallel`` workers at once; the bare side is
sequential. Target: anpred / bare ≤ 1.3×.

Besides wall time, each side's **CPU seconds** (user + system of the process and every
descendant it waited for, ``getrusage(RUSAGE_CHILDREN)``) are measured: on a machine that
other work loads, wall time stretches with the load while CPU seconds stay close to the
work done, so their ratio is the number to compare between runs. Run::

    python benchmarks/bench_run.py            # full: yolov8n, all libraries, 8 images
    python benchmarks/bench_run.py --again --without-isolation  # + warm caches, + no isolation
    python benchmarks/bench_run.py --quick    # CI smoke: torch,onnxruntime, 2 images
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from workload import PYTHON, machine_note, markdown_table, prepare_workload, run_child

SCRIPT = Path(__file__).resolve()
#: anpred run may take at most this multiple of the bare side.
RUN_TARGET = 1.3
IMPORT_NAMES = {
    "torch": "torch",
    "onnxruntime": "onnxruntime",
    "openvino": "openvino",
    "tensorflow": "tensorflow",
    "jax": "jax",
    "paddle": "paddle",
}


def _bare(job_path: str) -> int:
    """Child process: import, load and run plain inference on every input."""
    start = time.perf_counter()
    job = json.loads(Path(job_path).read_text())
    import numpy as np

    from anpred.backends.base import ModelJob
    from anpred.backends.registry import runner_class

    model = ModelJob.from_dict(job["model"])
    # default configuration, as in `anpred run`; for_job: torch on an ONNX file translates it
    runner = runner_class(job["library"]).for_job(model)({})
    imported = time.perf_counter()
    runner.activate(model)
    loaded = time.perf_counter()
    with np.load(job["inputs"]) as data:
        feeds = [data[key] for key in job["input_ids"]]
    for feed in feeds:
        runner.infer_plain(feed)
    done = time.perf_counter()
    print(
        json.dumps(
            {
                "library": job["library"],
                "version": runner.version(),
                "import_s": imported - start,
                "load_s": loaded - imported,
                "infer_s": done - loaded,
            }
        ),
        flush=True,
    )
    return 0


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed_run(
    command: list[str], env: dict[str, str], log: Path
) -> tuple[float, float, list[tuple[float, str]]]:
    """Run ``anpred run``; return its start (epoch), wall time and timed progress lines."""
    epoch = time.time()
    start = time.perf_counter()
    lines: list[tuple[float, str]] = []
    with open(log.with_suffix(".stdout"), "w") as stdout, open(log, "w") as progress:
        proc = subprocess.Popen(command, stdout=stdout, stderr=subprocess.PIPE, text=True, env=env)
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append((time.perf_counter() - start, line.rstrip()))
            progress.write(f"{lines[-1][0]:8.2f}s {lines[-1][1]}\n")
            progress.flush()
        code = proc.wait()
    wall = time.perf_counter() - start
    if code not in (0, 1):  # 1 = findings, a normal outcome
        tail = "\n".join(line for _, line in lines[-15:])
        raise RuntimeError(f"anpred run exited with {code}:\n{tail}")
    return epoch, wall, lines


def _phases(
    lines: list[tuple[float, str]], summary_at: float | None, wall: float
) -> list[tuple[str, float]]:
    """Split the run's wall time into phases from its progress lines."""

    def first(pattern: str) -> float | None:
        return next((t for t, line in lines if re.search(pattern, line)), None)

    reference_end = first(r"\[torch\[fp64\]\] (ok|non-finite|crash|timeout|error|already)")
    others_start = first(r"\[(?!torch\[fp64\])[^\]]+\] started")
    alone = reference_end is not None and (others_start is None or others_start >= reference_end)
    marks = [
        ("start, export (cached), inputs", first(r"^\d+ inputs, \d+ anchors")),
        # the fp64 reference runs alone before the others, or with them (overlapped)
        *([("fp64 reference worker (alone)", reference_end)] if alone else []),
        (
            "participant workers" + ("" if alone else " (fp64 reference with them)"),
            first(r"^analyse:"),
        ),
        ("analysis", summary_at),
        ("report, summary print, exit", wall),
    ]
    phases, previous = [], 0.0
    for name, at in marks:
        if at is None:
            continue
        phases.append((name, at - previous))
        previous = at
    return phases


def _storage_cost(run_dir: Path, scratch: Path) -> dict[str, float]:
    """Seconds per MB to write capture files: the workers' ``write_arrays`` vs ``np.savez``.

    Measured on the run's largest fp32 capture file (median of 3 writes).
    """
    import numpy as np

    from anpred.store import RunStore
    from anpred.store.files import write_arrays

    files = [f for folder in RunStore(run_dir).participant_folders() for f in folder.array_files()]
    sample = max((f for f in files if "fp64" not in f.parent.name), key=lambda f: f.stat().st_size)
    with np.load(sample) as data:
        arrays = {key: data[key] for key in data.files}
    megabytes = sum(a.nbytes for a in arrays.values()) / 1e6
    total_mb = 0.0
    for path in files:
        with np.load(path) as data:
            total_mb += sum(data[key].nbytes for key in data.files) / 1e6
    timings = {}
    writers = {"write_arrays": write_arrays, "savez": lambda path, values: np.savez(path, **values)}
    for name, write in writers.items():
        seconds = []
        for _ in range(3):
            start = time.perf_counter()
            write(scratch / "sample.npz", arrays)
            seconds.append(time.perf_counter() - start)
        timings[name] = sorted(seconds)[1] / megabytes
        timings[f"{name}_size_ratio"] = (scratch / "sample.npz").stat().st_size / 1e6 / megabytes
    (scratch / "sample.npz").unlink()
    return {"files": len(files), "total_mb": total_mb, "sample_mb": megabytes, **timings}


def main() -> int:
    """Warm the cache, time both sides, print the Markdown tables."""
    from anpred.execution.pool import worker_env
    from anpred.participants import parse_participants

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="yolov8n", help="zoo model or .onnx path")
    parser.add_argument("--libs", help="anpred --libs (default all; quick torch,onnxruntime)")
    parser.add_argument("--images", type=int, help="inputs (default 8; quick 2)")
    parser.add_argument("--quick", action="store_true", help="torch,onnxruntime and 2 images")
    parser.add_argument("--threads", type=int, default=1, help="threads per process (default 1)")
    parser.add_argument("--parallel", type=int, default=2, help="anpred --parallel (default 2)")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temp folder)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--again",
        action="store_true",
        help="also time a second anpred run of the same model (caches warm: compilations)",
    )
    parser.add_argument(
        "--without-isolation",
        action="store_true",
        help="also time anpred run --no-isolation (what stage isolation costs)",
    )
    parser.add_argument("--bare", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        return _bare(args.bare)
    libs = args.libs or ("torch,onnxruntime" if args.quick else "all")
    images = args.images or (2 if args.quick else 8)
    # anpred always adds torch (the fp32 reference participant): so does the bare side
    libraries = list(dict.fromkeys(["torch", *(p.library for p in parse_participants(libs))]))
    work = args.work or Path(tempfile.mkdtemp(prefix="anpred-bench-run-"))
    say = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    os.environ["ANPRED_CACHE"] = str(work / "cache")  # fresh cache, also for the children
    os.environ["YOLO_CONFIG_DIR"] = str(work / "yolo")
    # JAX's compilation cache (anpred's workers keep one under ANPRED_CACHE): the bare side
    # gets its own, so that anpred's first run compiles everything as on a first use
    env = {**worker_env(args.threads), "JAX_COMPILATION_CACHE_DIR": str(work / "bare-jax")}

    say(f"fresh ANPRED_CACHE {work / 'cache'}: generate weights and export (not timed)")
    workload = prepare_workload(args.model, images, work / "bare", say)
    for library in libraries:
        say(f"warm the OS file cache: import {library} (not timed)")
        subprocess.run(
            [PYTHON, "-c", f"import {IMPORT_NAMES[library]}"],
            env=env,
            check=True,
            capture_output=True,
        )

    bare: list[dict[str, Any]] = []
    for library in libraries:
        say(f"bare {library}: import, load, plain inference on {images} inputs")
        path = work / f"bare-{library}.json"
        path.write_text(
            json.dumps(
                {
                    "library": library,
                    "model": workload.job,
                    "inputs": str(workload.inputs),
                    "input_ids": workload.input_ids,
                }
            )
        )
        cpu = children_cpu()
        result, wall = run_child(SCRIPT, ["--bare", str(path)], env)
        bare.append({**result, "wall_s": wall, "cpu_s": children_cpu() - cpu})
    bare_total = sum(b["wall_s"] for b in bare)
    bare_cpu = sum(b["cpu_s"] for b in bare)

    out = work / "run"
    command = [
        PYTHON,
        "-m",
        "anpred",
        "run",
        args.model,
        "--libs",
        libs,
        "--images",
        str(images),
        "--out",
        str(out),
        "--threads",
        str(args.threads),
        "--parallel",
        str(args.parallel),
    ]
    say(" ".join(["anpred", *command[3:]]))
    load_before = os.getloadavg()
    cpu = children_cpu()
    started, wall, lines = _timed_run(command, {**os.environ}, work / "anpred-run.log")
    anpred_cpu = children_cpu() - cpu
    again: dict[str, float] = {}
    if args.again:
        say("again, into another folder: " + " ".join(["anpred", *command[3:]]))
        command[command.index("--out") + 1] = str(work / "run-again")
        cpu = children_cpu()
        _, again_wall, _ = _timed_run(command, {**os.environ}, work / "anpred-run-again.log")
        again = {"wall_s": again_wall, "cpu_s": children_cpu() - cpu}
    plain: dict[str, float] = {}
    if args.without_isolation:
        command[command.index("--out") + 1] = str(work / "run-no-isolation")
        say("without stage isolation: " + " ".join(["anpred", *command[3:], "--no-isolation"]))
        cpu = children_cpu()
        # a fresh JAX compilation cache: the first run's would spare this one the anchored
        # and plain compilations (measured: jax 14.5 CPU s cold vs 5.0 from the cache)
        cold = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(work / "no-isolation-jax")}
        _, plain_wall, _ = _timed_run(
            [*command, "--no-isolation"], cold, work / "anpred-run-no-isolation.log"
        )
        plain = {"wall_s": plain_wall, "cpu_s": children_cpu() - cpu}
    from anpred.store import RunStore

    store = RunStore(out)
    summary_at = store.summary_path.stat().st_mtime - started if store.has_summary() else None
    phases = _phases(lines, summary_at, wall)
    workers = store.read_participants()

    print(
        f"## anpred run vs bare inference — {args.model}, {images} inputs, libs {libs}, "
        f"{args.threads} thread(s) per process, anpred --parallel {args.parallel}\n"
    )
    print(
        f"{machine_note()}; load average when anpred run started: "
        + ", ".join(f"{x:.1f}" for x in load_before)
        + "\n"
    )
    ratio, cpu_ratio = wall / bare_total, anpred_cpu / bare_cpu
    print(
        markdown_table(
            ["side", "wall s", "ratio", "CPU s", "CPU ratio"],
            [
                ["bare inference (sum over libraries)", f"{bare_total:.1f}", "1.00",
                 f"{bare_cpu:.1f}", "1.00"],
                [
                    f"anpred run ({len(workers)} workers incl. fp64 reference)",
                    f"{wall:.1f}",
                    f"{ratio:.2f}",
                    f"{anpred_cpu:.1f}",
                    f"{cpu_ratio:.2f}",
                ],
            ],
        )
    )  # fmt: skip
    verdict = "meets" if ratio <= RUN_TARGET else "misses"
    print(
        f"\nanpred / bare = {ratio:.2f}× wall ({verdict} the ≤ {RUN_TARGET}× target), "
        f"{cpu_ratio:.2f}× CPU seconds.\n"
    )
    if again:
        print(
            f"A second anpred run of the same model (caches warm): {again['wall_s']:.1f} s wall "
            f"({again['wall_s'] / bare_total:.2f}×), {again['cpu_s']:.1f} CPU s "
            f"({again['cpu_s'] / bare_cpu:.2f}×).\n"
        )
    if plain:
        print(
            f"The same run with --no-isolation (no second inference per stage): "
            f"{plain['wall_s']:.1f} s wall ({plain['wall_s'] / bare_total:.2f}×), "
            f"{plain['cpu_s']:.1f} CPU s ({plain['cpu_s'] / bare_cpu:.2f}×).\n"
        )
    print("### Bare side per library (process wall time from outside)\n")
    print(
        markdown_table(
            [
                "library",
                "version",
                "import s",
                "load s",
                f"{images} inferences s",
                "process wall s",
                "process CPU s",
            ],
            [
                [
                    b["library"],
                    b["version"],
                    f"{b['import_s']:.1f}",
                    f"{b['load_s']:.1f}",
                    f"{b['infer_s']:.1f}",
                    f"{b['wall_s']:.1f}",
                    f"{b['cpu_s']:.1f}",
                ]
                for b in bare
            ],
        )
    )
    print("\n### anpred run phases (from its progress lines)\n")
    print(
        markdown_table(
            ["phase", "s", "share"],
            [[name, f"{s:.1f}", f"{100 * s / wall:.0f}%"] for name, s in phases],
        )
    )
    print("\n### anpred workers (their own timings, s)\n")
    keys = [
        "import", "load", "first_inference", "inference", "isolation", "reference_wait", "cpu",
    ]  # fmt: skip
    print(
        markdown_table(
            ["participant", "status", *keys],
            [
                [name, w["status"], *(f"{w['timings'].get(k, 0):.1f}" for k in keys)]
                for name, w in workers.items()
            ],
        )
    )
    print(
        "\n(`inference`/`isolation`: the last call's time; `first_inference` includes "
        "compilation; `reference_wait`: waiting for the fp64 reference's captures; `cpu`: the "
        "worker's CPU seconds.)"
    )
    storage = _storage_cost(out, work)
    print("\n### Capture files (measured after the run, on its largest fp32 capture)\n")
    print(
        markdown_table(
            [
                "writer",
                "s per MB",
                "file size / data",
                f"estimate for the run's {storage['files']} files ({storage['total_mb']:.0f} MB)",
            ],
            [
                [
                    name,
                    f"{storage[name]:.4f}",
                    f"{storage[name + '_size_ratio']:.2f}",
                    f"{storage[name] * storage['total_mb']:.0f} s (CPU, spread over the workers)",
                ]
                for name in ("write_arrays", "savez")
            ],
        )
    )
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "model": args.model,
                    "libs": libs,
                    "images": images,
                    "storage": storage,
                    "bare": bare,
                    "bare_total_s": bare_total,
                    "bare_cpu_s": bare_cpu,
                    "anpred_s": wall,
                    "anpred_cpu_s": anpred_cpu,
                    "ratio": ratio,
                    "cpu_ratio": cpu_ratio,
                    "load_before": load_before,
                    "again": again,
                    "without_isolation": plain,
                    "phases": dict(phases),
                    "workers": workers,
                },
                indent=1,
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
