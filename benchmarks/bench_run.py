"""End-to-end cost of ``anpred run`` against the inferences it must run, and against bare
inference.

The method's floor is the inferences it needs: every participant runs each input anchored
and stage-isolated (each stage fed the fp64 reference's stage input), and the fp64
reference runs it too. Three sides, timed in one benchmark run, same machine, same threads
per process, one after the other:

* **anpred**: ``python -m anpred run MODEL --libs LIBS --images N`` (beyond 8 inputs,
  ``--images 8 --synthetic N-8``: seeded synthetic images fill the rest) — everything: CLI
  start, export fetched from the cache (in a torch process), input preprocessing, the fp64
  reference worker, every participant's anchored inference, the observer check's plain
  inference (first two inputs) and stage isolation, capture files, the analysis and the
  report.
* **needed**: for the fp64 reference and each participant, one fresh process that imports
  the library, loads the model and runs, through the runner ``anpred`` uses, what anpred
  must run on the same N inputs: anchored inference (``runner.infer``) and stage isolation
  (``runner.isolate``, fed the fp64 reference's anchors, which its process saved after its
  timed part); the fp64 reference anchored inference only. Each process's CPU seconds
  are its own ``time.process_time()`` at the end of its last inference (interpreter start,
  imports, load and compilation included, as a worker pays them; the fp64 anchors' file is
  written after). Printed: ``anpred / needed inferences = R`` (CPU seconds; target ≤ 1.15).
* **bare**: for each library, a fresh process that imports it, loads the model and runs
  plain inference (``runner.infer_plain``) on the same inputs: the floor of a run with
  ``--no-isolation`` (which still runs the fp64 reference and the anchored inferences), whose
  ratio to it is printed beside.

Both sides use one fresh ``ANPRED_CACHE`` in which the weights and the anchored export
were generated beforehand (not timed); JAX's persistent compilation cache is fresh for
every side and run, so each compiles as on a first use. Before timing, each library is
imported once in a throw-away process so that no side pays for a cold OS file cache.
``anpred run`` runs ``--parallel`` workers at once; the other sides are sequential, so
their wall times are sums and **CPU seconds** (user + system of every process, its threads
and descendants) are the numbers to compare: on a machine that other work loads, wall time
stretches with the load while CPU seconds stay close to the work done. Where the rest goes:
the workers' own CPU against the needed inferences' (their captures, the observer check,
waiting), the analysis's and the run's orchestration (everything outside the workers). Run::

    python benchmarks/bench_run.py            # yolov8n, all libraries, 8 images (minutes)
    python benchmarks/bench_run.py --full     # yolov8n and resnet50, 8 and 32 images (11 min, idle)
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

from workload import (
    PYTHON,
    input_flags,
    machine_note,
    markdown_table,
    prepare_workload,
    run_child,
)

from anpred.execution.worker import OBSERVER_INPUTS

SCRIPT = Path(__file__).resolve()
#: anpred run may take at most this multiple of the inferences it needs (issue 41).
NEEDED_TARGET = 1.15
#: ``--full``: the models and input counts measured.
FULL_MODELS = ("yolov8n", "resnet50")
FULL_IMAGES = (8, 32)
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
                "cpu_s": time.process_time(),
            }
        ),
        flush=True,
    )
    return 0


def _needed(job_path: str) -> int:
    """Child process: what anpred must run of one participant (anchored inference, and stage
    isolation when the job names the fp64 reference's anchors) or of the fp64 reference
    (anchored inference, its anchors saved after the timed part).
    """
    start = time.perf_counter()
    job = json.loads(Path(job_path).read_text())
    import numpy as np

    from anpred.backends.base import ModelJob
    from anpred.backends.registry import runner_class

    model = ModelJob.from_dict(job["model"])
    runner = runner_class(job["library"]).for_job(model)(job["settings"])
    imported = time.perf_counter()
    runner.activate(model)
    loaded = time.perf_counter()
    with np.load(job["inputs"]) as data:
        feeds = {key: data[key] for key in job["input_ids"]}
    fed = np.load(job["reference"]) if job.get("reference") else None
    kept: dict[str, np.ndarray] = {}
    infer_s = isolate_s = 0.0
    for input_id, feed in feeds.items():
        begin = time.perf_counter()
        capture = runner.infer(feed)
        infer_s += time.perf_counter() - begin
        if job.get("save"):
            kept.update({f"{input_id}/{k}": v for k, v in capture.arrays.items()})
        if fed is not None:
            anchors = {
                k.split("/", 1)[1]: fed[k] for k in fed.files if k.startswith(input_id + "/")
            }
            begin = time.perf_counter()
            runner.isolate(feed, anchors)
            isolate_s += time.perf_counter() - begin
    cpu = time.process_time()  # interpreter start, imports, load, inferences: this process's
    if job.get("save"):  # what the participants' isolation is fed, as the worker feeds it
        np.savez(job["save"], **{k: v.astype(np.float32) for k, v in kept.items()})
    print(
        json.dumps(
            {
                "library": job["library"],
                "participant": job["participant"],
                "import_s": imported - start,
                "load_s": loaded - imported,
                "infer_s": infer_s,
                "isolate_s": isolate_s,
                "cpu_s": cpu,
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


def _side(
    children: list[tuple[str, Path]], env_of: Any, say: Any
) -> tuple[list[dict[str, Any]], float, float]:
    """Run ``(flag, job file)`` children one after the other: (results, wall s, CPU s)."""
    results = []
    for flag, path in children:
        result, wall = run_child(SCRIPT, [flag, str(path)], env_of(path))
        results.append({**result, "wall_s": wall})
        say(f"  {path.stem}: {wall:.1f} s wall, {result['cpu_s']:.1f} CPU s")
    return results, sum(r["wall_s"] for r in results), sum(r["cpu_s"] for r in results)


def measure(
    model: str, images: int, libs: str, args: argparse.Namespace, work: Path, say: Any
) -> dict[str, Any]:
    """One case: the needed inferences, ``anpred run``, and, unless ``--isolation-only``,
    bare inference and ``anpred run --no-isolation``; all in ``work``.
    """
    from anpred.execution.pool import worker_env
    from anpred.participants import REFERENCE64, parse_participant, parse_participants

    work.mkdir(parents=True, exist_ok=True)
    participants = parse_participants(libs)
    if "torch" not in [p.name for p in participants]:  # anpred adds the fp32 reference
        participants.insert(0, parse_participant("torch"))
    libraries = list(dict.fromkeys(p.library for p in participants))
    say(f"{model}, {images} inputs: export (cached) and inputs (not timed)")
    workload = prepare_workload(model, images, work / "bare", say)
    for library in libraries:
        say(f"warm the OS file cache: import {library} (not timed)")
        subprocess.run(
            [PYTHON, "-c", f"import {IMPORT_NAMES[library]}"],
            env=worker_env(args.threads),
            check=True,
            capture_output=True,
        )

    def env_of(path: Path) -> dict[str, str]:  # a fresh JAX compilation cache per process
        return {**worker_env(args.threads), "JAX_COMPILATION_CACHE_DIR": str(path) + ".jax"}

    def job(name: str, **fields: Any) -> Path:
        path = work / f"{name}.json"
        base = {"model": workload.job, "inputs": str(workload.inputs)}
        path.write_text(json.dumps({**base, "input_ids": workload.input_ids, **fields}))
        return path

    anchors = work / "fp64-anchors.npz"
    reference = parse_participant(REFERENCE64)
    children = [
        ("--needed", job("needed-fp64", library="torch", participant=reference.name,
                         settings=dict(reference.settings), save=str(anchors))),
    ]  # fmt: skip
    for p in participants:
        name = p.name.replace("[", "-").replace("]", "")
        children.append(
            ("--needed", job(f"needed-{name}", library=p.library, participant=p.name,
                             settings=dict(p.settings), reference=str(anchors)))
        )  # fmt: skip
    say(f"needed inferences: fp64 reference, then {len(participants)} participants "
        "anchored + isolated")  # fmt: skip
    needed, needed_wall, needed_cpu = _side(children, env_of, say)
    anchors.unlink(missing_ok=True)

    def anpred(out: str, *extra: str) -> dict[str, Any]:
        command = [
            PYTHON, "-m", "anpred", "run", model, "--libs", libs, *input_flags(images),
            "--out", str(work / out), "--threads", str(args.threads),
            "--parallel", str(args.parallel), *extra,
        ]  # fmt: skip
        say(" ".join(["anpred", *command[3:]]))
        env = {**os.environ, "JAX_COMPILATION_CACHE_DIR": str(work / f"{out}.jax")}
        load = os.getloadavg()
        cpu = children_cpu()
        started, wall, lines = _timed_run(command, env, work / f"{out}.log")
        store = RunStore(work / out)
        summary_at = store.summary_path.stat().st_mtime - started if store.has_summary() else None
        return {
            "wall_s": wall,
            "cpu_s": children_cpu() - cpu,
            "load_before": load,
            "phases": dict(_phases(lines, summary_at, wall)),
            "workers": store.read_participants(),
        }

    from anpred.store import RunStore

    run = anpred("run")
    result: dict[str, Any] = {
        "model": model, "images": images, "libs": libs, "needed": needed,
        "needed_wall_s": needed_wall, "needed_cpu_s": needed_cpu, "anpred": run,
        "ratio": run["cpu_s"] / needed_cpu,
    }  # fmt: skip
    if not args.isolation_only:
        bare_children = [
            ("--bare", job(f"bare-{library}", library=library)) for library in libraries
        ]
        say(f"bare inference: {len(libraries)} libraries, plain")
        bare, bare_wall, bare_cpu = _side(bare_children, env_of, say)
        plain = anpred("run-no-isolation", "--no-isolation")
        result.update(
            bare=bare, bare_wall_s=bare_wall, bare_cpu_s=bare_cpu, no_isolation=plain,
            no_isolation_ratio=plain["cpu_s"] / bare_cpu,
        )  # fmt: skip
    if args.storage:
        result["storage"] = _storage_cost(work / "run", work)
    return result


def _where(case: dict[str, Any]) -> list[list[str]]:
    """Where anpred's CPU goes beyond the needed inferences: rows of (what, CPU s, share)."""
    run, needed = case["anpred"], case["needed_cpu_s"]
    workers_cpu = sum(w["timings"].get("cpu", 0.0) for w in run["workers"].values())
    rest = run["cpu_s"] - workers_cpu
    analysis_wall = run["phases"].get("analysis", 0.0)
    spent = {
        k: sum(w["timings"].get(k, 0.0) for w in run["workers"].values())
        for k in ("capture_cpu", "observer_cpu")
    }
    rows = [
        ["needed inferences (processes of their own)", f"{needed:.1f}", ""],
        ["anpred run, all processes", f"{run['cpu_s']:.1f}", ""],
        ["  its workers (their own CPU)", f"{workers_cpu:.1f}",
         f"{100 * workers_cpu / run['cpu_s']:.0f}%"],
        ["  of which beyond the needed inferences (captures, observer check, waits)",
         f"{workers_cpu - needed:.1f}", f"{100 * (workers_cpu - needed) / run['cpu_s']:.0f}%"],
        ["    writing capture files", f"{spent['capture_cpu']:.1f}",
         f"{100 * spent['capture_cpu'] / run['cpu_s']:.0f}%"],
        [f"    the observer check (plain inference on the first {OBSERVER_INPUTS} inputs)",
         f"{spent['observer_cpu']:.1f}", f"{100 * spent['observer_cpu'] / run['cpu_s']:.0f}%"],
        ["  outside the workers (analysis, export and inputs from the cache, CLI, "
         "orchestration, report)", f"{rest:.1f}", f"{100 * rest / run['cpu_s']:.0f}%"],
        ["  the analysis phase's wall time (its processes are in the line above)",
         f"{analysis_wall:.1f} s wall", ""],
    ]  # fmt: skip
    return rows


def report(case: dict[str, Any], args: argparse.Namespace) -> None:
    """Print one case's tables."""
    run = case["anpred"]
    print(
        f"\n## {case['model']}, {case['images']} inputs, libs {case['libs']}, "
        f"{args.threads} thread(s) per process, anpred --parallel {args.parallel}\n"
    )
    print(
        "load average when anpred run started: "
        + ", ".join(f"{x:.1f}" for x in run["load_before"])
        + "\n"
    )
    rows = [
        ["needed inferences (sum over processes)", f"{case['needed_wall_s']:.1f}",
         f"{case['needed_cpu_s']:.1f}", "1.00"],
        [f"anpred run ({len(run['workers'])} workers incl. fp64 reference)",
         f"{run['wall_s']:.1f}", f"{run['cpu_s']:.1f}", f"{case['ratio']:.2f}"],
    ]  # fmt: skip
    if "bare" in case:
        plain = case["no_isolation"]
        rows += [
            ["bare inference (sum over libraries)", f"{case['bare_wall_s']:.1f}",
             f"{case['bare_cpu_s']:.1f}", "1.00"],
            ["anpred run --no-isolation", f"{plain['wall_s']:.1f}", f"{plain['cpu_s']:.1f}",
             f"{case['no_isolation_ratio']:.2f}"],
        ]  # fmt: skip
    print(markdown_table(["side", "wall s", "CPU s", "CPU ratio"], rows))
    verdict = "meets" if case["ratio"] <= NEEDED_TARGET else "misses"
    print(f"\nanpred / needed inferences = {case['ratio']:.2f} ({verdict} the ≤ {NEEDED_TARGET} "
          "target; CPU seconds, per input alike)")  # fmt: skip
    if "bare" in case:
        print(f"anpred --no-isolation / bare inference = {case['no_isolation_ratio']:.2f}")
    print("\n### Where the rest goes (CPU s)\n")
    print(markdown_table(["what", "CPU s", "share of anpred"], _where(case)))
    print("\n### Needed inferences per process\n")
    print(
        markdown_table(
            ["process", "import s", "load s", "anchored s", "isolated s", "wall s", "CPU s"],
            [
                [n["participant"], f"{n['import_s']:.1f}", f"{n['load_s']:.1f}",
                 f"{n['infer_s']:.1f}", f"{n['isolate_s']:.1f}", f"{n['wall_s']:.1f}",
                 f"{n['cpu_s']:.1f}"]
                for n in case["needed"]
            ],
        )
    )  # fmt: skip
    print("\n### anpred run phases (from its progress lines)\n")
    print(
        markdown_table(
            ["phase", "s", "share"],
            [[name, f"{t:.1f}", f"{100 * t / run['wall_s']:.0f}%"]
             for name, t in run["phases"].items()],
        )
    )  # fmt: skip
    print("\n### anpred workers (their own timings, s)\n")
    keys = [
        "import", "load", "first_inference", "inference", "isolation", "reference_wait",
        "capture_cpu", "observer_cpu", "cpu",
    ]  # fmt: skip
    print(
        markdown_table(
            ["participant", "status", *keys],
            [
                [name, w["status"], *(f"{w['timings'].get(k, 0):.1f}" for k in keys)]
                for name, w in run["workers"].items()
            ],
        )
    )
    print(
        "\n(`inference`/`isolation`: the last call's time; `first_inference` includes "
        "compilation; `reference_wait`: waiting for the fp64 reference's captures; "
        "`capture_cpu`: CPU seconds writing capture files; `observer_cpu`: CPU seconds of the "
        "observer check's plain inferences; `cpu`: the worker's CPU seconds.)"
    )
    storage = case.get("storage")
    if storage:
        print("\n### Capture files (measured after the run, on its largest fp32 capture)\n")
        print(
            markdown_table(
                ["writer", "s per MB", "file size / data",
                 f"estimate for the run's {storage['files']} files ({storage['total_mb']:.0f} MB)"],
                [
                    [name, f"{storage[name]:.4f}", f"{storage[name + '_size_ratio']:.2f}",
                     f"{storage[name] * storage['total_mb']:.0f} s (CPU, spread over the workers)"]
                    for name in ("write_arrays", "savez")
                ],
            )
        )  # fmt: skip


def _per_input(cases: list[dict[str, Any]]) -> None:
    """Per-input (marginal) ratios from two input counts of one model: fixed costs (imports,
    loads, compilation) cancel.
    """
    for model in dict.fromkeys(c["model"] for c in cases):
        mine = sorted((c for c in cases if c["model"] == model), key=lambda c: c["images"])
        if len(mine) < 2:
            continue
        a, b = mine[0], mine[-1]
        extra = b["images"] - a["images"]
        anpred = (b["anpred"]["cpu_s"] - a["anpred"]["cpu_s"]) / extra
        needed = (b["needed_cpu_s"] - a["needed_cpu_s"]) / extra
        line = (
            f"{model}, per additional input ({a['images']} -> {b['images']}): anpred "
            f"{anpred:.2f} CPU s, needed inferences {needed:.2f}: {anpred / needed:.2f}"
        )
        if "bare" in a and "bare" in b:
            plain = (b["no_isolation"]["cpu_s"] - a["no_isolation"]["cpu_s"]) / extra
            bare = (b["bare_cpu_s"] - a["bare_cpu_s"]) / extra
            line += f"; --no-isolation {plain:.2f} vs bare {bare:.2f}: {plain / bare:.2f}"
        print(line)


def main() -> int:
    """Warm the cache, time the sides of each case, print the Markdown tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="yolov8n", help="zoo model or .onnx path")
    parser.add_argument("--libs", help="anpred --libs (default all; quick torch,onnxruntime)")
    parser.add_argument("--images", type=int, help="inputs (default 8; quick 2)")
    parser.add_argument("--quick", action="store_true", help="torch,onnxruntime and 2 images")
    parser.add_argument(
        "--full",
        action="store_true",
        help=f"every case: {', '.join(FULL_MODELS)} at {' and '.join(map(str, FULL_IMAGES))} "
        "inputs (11 minutes on an idle 2-core machine, more under load)",
    )
    parser.add_argument("--threads", type=int, default=1, help="threads per process (default 1)")
    parser.add_argument("--parallel", type=int, default=2, help="anpred --parallel (default 2)")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temp folder)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--isolation-only",
        action="store_true",
        help="skip bare inference and anpred run --no-isolation",
    )
    parser.add_argument(
        "--storage", action="store_true", help="also time the capture writers on the run's files"
    )
    parser.add_argument("--bare", help=argparse.SUPPRESS)
    parser.add_argument("--needed", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.bare:
        return _bare(args.bare)
    if args.needed:
        return _needed(args.needed)
    libs = args.libs or ("torch,onnxruntime" if args.quick else "all")
    if args.full:
        cases = [(m, n) for m in FULL_MODELS for n in FULL_IMAGES]
    else:
        cases = [(args.model, args.images or (2 if args.quick else 8))]
    work = args.work or Path(tempfile.mkdtemp(prefix="anpred-bench-run-"))
    say = lambda message: print(message, file=sys.stderr, flush=True)  # noqa: E731
    os.environ["ANPRED_CACHE"] = str(work / "cache")  # fresh cache, also for the children
    os.environ["YOLO_CONFIG_DIR"] = str(work / "yolo")
    print(f"# anpred run against the inferences it needs\n\n{machine_note()}")
    _compile_bytecode(say)
    results = []
    for model, images in cases:
        folder = work / f"{Path(model).stem}-{images}"
        results.append(measure(model, images, libs, args, folder, say))
        report(results[-1], args)
        if args.json:  # as it goes: a long --full keeps what it measured
            args.json.write_text(json.dumps(results, indent=1))
    print()
    _per_input(results)
    first = results[0]
    print(f"\nanpred / needed inferences = {first['ratio']:.2f}  "
          f"({first['model']}, {first['images']} inputs, CPU seconds)")  # fmt: skip
    return 0


def _compile_bytecode(say: Any) -> None:
    """Compile anpred's modules to bytecode once (not timed), as an installed package has
    them: where ``PYTHONDONTWRITEBYTECODE`` is set (this machine sets it) and nothing is
    compiled, every process of both sides compiled the anpred modules it imports from source
    again, ~0.12 CPU s in the driver alone, more in anpred's processes than in the needed
    ones (which import a runner only).
    """
    import anpred

    say("compile anpred's modules to bytecode (not timed)")
    package = str(Path(anpred.__file__).parent)
    subprocess.run([PYTHON, "-m", "compileall", "-q", package], check=True, capture_output=True)


if __name__ == "__main__":
    raise SystemExit(main())
