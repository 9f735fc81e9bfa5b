r"""Scaling curves: wall time, peak memory and disk of ``anpred run`` against the number of
inputs, next to bare inference of the same libraries on the same inputs.

For every configuration (a model and an anchor granularity) and every size N:

* **anpred**: ``python -m anpred run MODEL --libs LIBS --granularity G`` on N inputs
  (the bundled photographs, then seeded synthetic images beyond 8), timed from outside.
  A sampler polls every 0.5 s the resident memory of all of this script's descendant
  processes together (the CLI and its workers: "peak memory, children included") and the
  bytes of the run directory (peak disk: captures before pruning); the final disk is
  measured after the run (``--keep-captures`` as given; default ``needed``).
* **bare**: per library, one fresh process imports it, loads the model and runs plain
  inference on the same N preprocessed inputs -- ``bench_run.py``'s bare child, reused
  as is --; the side's wall time is the sum over libraries, its peak memory the largest
  sampled. Measured once per model and size (it does not depend on the granularity).

Both sides share one fresh ``ANPRED_CACHE`` whose weights and anchored exports are made
beforehand (not timed), and each library is imported once before timing (warm OS cache).
Per configuration, least squares fits ``y = a + b·N``; ``b`` is the per-input slope
(seconds, MB of memory, MB of disk per input), compared with bare inference's. The plot
(``--plot``, default ``docs/scaling.png``) shows the three quantities against N with the
fitted slopes, the sizes, libraries and the machine's load average written on it. Run::

    python benchmarks/bench_scaling.py                  # full: yolov8n, all libraries,
        # 1,8,32,128 inputs, stage and layer anchors, and yolov8s at stage anchors
    python benchmarks/bench_scaling.py --libs torch,onnxruntime,openvino --sizes 1,8,32 \
        --no-layer --no-large                           # reduced, for a loaded machine
    python benchmarks/bench_scaling.py --other-sizes 1,8,32   # the full 4 sizes for yolov8n
        # stage anchors, 1-32 for its layer anchors and yolov8s (about an hour on 2 cores)
    python benchmarks/bench_scaling.py --quick          # CI smoke: torch,onnxruntime, 1,2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import bench_run
from workload import (
    PYTHON,
    input_flags,
    machine_note,
    markdown_table,
    prepare_workload,
    run_child,
)

#: Seconds between two samples of memory and disk.
PERIOD = 0.5
#: The sizes of the full curve, and the command that measures it.
FULL_SIZES = [1, 8, 32, 128]
FULL_COMMAND = "python benchmarks/bench_scaling.py"


def process_tree_rss(root: int) -> int:
    """Resident bytes of every descendant of process ``root`` together (``root`` excluded).

    Read from ``/proc`` (Linux); a process that ends while being read is skipped.
    """
    parents: dict[int, int] = {}
    rss: dict[int, int] = {}
    page = os.sysconf("SC_PAGE_SIZE")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as stat:
                fields = stat.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{entry}/statm") as statm:
                rss[int(entry)] = int(statm.read().split()[1]) * page
        except (OSError, IndexError, ValueError):
            continue
        parents[int(entry)] = int(fields[1])
    total = 0
    for pid, size in rss.items():
        ancestor = parents.get(pid)
        while ancestor is not None and ancestor != root and ancestor > 1:
            ancestor = parents.get(ancestor)
        if ancestor == root:
            total += size
    return total


def folder_bytes(folder: Path) -> int:
    """Bytes of the regular files under ``folder`` (links not followed; 0 when absent)."""
    total = 0
    for base, _dirs, files in os.walk(folder):
        for name in files:
            try:
                info = os.lstat(os.path.join(base, name))
            except OSError:  # removed while walking (a temporary file renamed, a prune)
                continue
            if not os.path.islink(os.path.join(base, name)):
                total += info.st_size
    return total


class Sampler:
    """Samples this process's descendants' memory and a folder's bytes until stopped."""

    def __init__(self, folder: Path | None = None) -> None:
        self.folder = folder
        self.peak_rss = 0
        self.peak_disk = 0
        self.loads: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = os.getpid()
        while not self._stop.is_set():
            self.peak_rss = max(self.peak_rss, process_tree_rss(me))
            if self.folder is not None:
                self.peak_disk = max(self.peak_disk, folder_bytes(self.folder))
            self.loads.append(os.getloadavg()[0])
            self._stop.wait(PERIOD)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()


@dataclass
class Point:
    """One measured size of one configuration."""

    n: int
    wall_s: float
    peak_mb: float
    peak_disk_mb: float = 0.0
    final_disk_mb: float = 0.0
    load: float = 0.0
    findings: int = 0


@dataclass
class Curve:
    """A configuration's points (``bare``: bare inference of its model)."""

    label: str
    model: str
    granularity: str
    bare: bool = False
    points: list[Point] = field(default_factory=list)


def fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float]:
    """Least squares ``y = a + b·x``; returns ``(a, b)`` (``b = 0`` for one point)."""
    n = len(xs)
    if n < 2:
        return (ys[0] if ys else 0.0), 0.0
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys, strict=True)) / sxx if sxx else 0.0
    return my - slope * mx, slope


def slopes(curve: Curve) -> dict[str, float]:
    """Per-input slopes of a curve: seconds, peak memory MB, peak and final disk MB."""
    xs = [p.n for p in curve.points]
    return {
        key: fit(xs, [getattr(p, key) for p in curve.points])[1]
        for key in ("wall_s", "peak_mb", "peak_disk_mb", "final_disk_mb")
    }


def measure_anpred(
    model: str, granularity: str, n: int, libs: str, args: argparse.Namespace, out: Path
) -> Point:
    """One timed ``anpred run`` of ``n`` inputs into ``out``."""
    command = [
        PYTHON, "-m", "anpred", "run", model, "--libs", libs, *input_flags(n),
        "--granularity", granularity, "--out", str(out), "--threads", str(args.threads),
        "--parallel", str(args.parallel), "--keep-captures", args.keep_captures,
    ]  # fmt: skip
    log = out.with_suffix(".log")
    with Sampler(out) as sampler, open(log, "w") as stderr:
        start = time.perf_counter()
        code = subprocess.call(command, stdout=subprocess.DEVNULL, stderr=stderr)
        wall = time.perf_counter() - start
    if code not in (0, 1):  # 1 = findings, a normal outcome
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise RuntimeError(f"anpred run exited with {code}:\n{tail}")
    from anpred.store import RunStore

    summary = RunStore(out).read_summary()
    return Point(
        n,
        wall,
        sampler.peak_rss / 1e6,
        max(sampler.peak_disk, folder_bytes(out)) / 1e6,
        folder_bytes(out) / 1e6,
        max(sampler.loads, default=os.getloadavg()[0]),
        len(summary["findings"]),
    )


def measure_bare(run_dir: Path, libraries: Sequence[str], threads: int, work: Path) -> Point:
    """Bare inference of every library on ``run_dir``'s inputs (``bench_run``'s child)."""
    from anpred.backends.base import ModelJob
    from anpred.execution.pool import worker_env
    from anpred.interchange.export import AnchoredExport
    from anpred.interchange.user_module import is_onnx_path
    from anpred.store import RunStore

    store = RunStore(run_dir)
    settings = store.read_settings()
    export = AnchoredExport.from_dict(store.read_export())
    zoo = None if is_onnx_path(settings["model"]) else settings["model"]
    job = ModelJob(export, zoo, None, settings.get("seed", 0)).to_dict()
    ids = store.read_input_ids()
    wall = 0.0
    with Sampler() as sampler:
        for library in libraries:
            path = work / f"bare-{library}.json"
            path.write_text(
                json.dumps(
                    {
                        "library": library,
                        "model": job,
                        "inputs": str(store.inputs_path),
                        "input_ids": ids,
                    }
                )
            )
            wall += run_child(bench_run.SCRIPT, ["--bare", str(path)], worker_env(threads))[1]
    return Point(len(ids), wall, sampler.peak_rss / 1e6, load=max(sampler.loads, default=0.0))


def warm(
    models: Sequence[str], granularities: Sequence[str], libraries: Sequence[str], work: Path
) -> None:
    """Weights and anchored exports into the fresh cache; import every library once."""
    from anpred.execution.pool import worker_env
    from anpred.pipeline.model_export import export_model
    from anpred.settings import RunOptions

    for model in models:
        prepare_workload(model, 1, work / f"warm-{Path(model).stem}", _say)
        for granularity in granularities:
            folder = work / f"warm-{Path(model).stem}-{granularity}"
            folder.mkdir(parents=True, exist_ok=True)
            export_model(RunOptions(model=model, granularity=granularity), folder, _say)
    for library in libraries:
        subprocess.run(
            [PYTHON, "-c", f"import {bench_run.IMPORT_NAMES[library]}"],
            env=worker_env(1),
            check=True,
            capture_output=True,
        )


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def plot(curves: Sequence[Curve], path: Path, title: str) -> None:
    """Wall time, peak memory and disk against inputs, with the fitted per-input slopes."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = (
        ("wall_s", "wall time (s)", "s"),
        ("peak_mb", "peak memory, children incl. (MB)", "MB"),
        ("final_disk_mb", "disk (MB): after the run, and peak (dotted)", "MB"),
    )
    bare = {c.model: slopes(c)["wall_s"] for c in curves if c.bare}
    fig, axes = plt.subplots(1, 3, figsize=(15, 7.2))
    for ax, (key, label, unit) in zip(axes, panels, strict=True):
        for curve in curves:
            if curve.bare and key == "final_disk_mb":
                continue
            xs = [p.n for p in curve.points]
            ys = [getattr(p, key) for p in curve.points]
            slope = slopes(curve)[key]
            text = f"{curve.label}: {slope:.3g} {unit}/input"
            if key == "wall_s" and not curve.bare and bare.get(curve.model):
                text += f" ({slope / bare[curve.model]:.1f}x bare's)"
            ax.plot(xs, ys, "--" if curve.bare else "-", marker="o", label=text)
            if key == "final_disk_mb" and not curve.bare:
                peak = [p.peak_disk_mb for p in curve.points]
                ax.plot(
                    xs,
                    peak,
                    ":",
                    marker="x",
                    color=ax.lines[-1].get_color(),
                    label=f"{curve.label}, peak: {slopes(curve)['peak_disk_mb']:.3g} MB/input",
                )
        ax.set_xlabel("inputs")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        # below the panel: with a handful of curves a legend inside hides the data
        ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    wrapped = "\n".join(textwrap.fill(line, 150) for line in title.splitlines())
    fig.suptitle(wrapped, fontsize=9)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")  # the legends below the panels too
    plt.close(fig)


def _configurations(args: argparse.Namespace) -> list[tuple[str, str]]:
    configs = [(args.model, "stage")]
    if not args.no_layer:
        configs.append((args.model, "layer"))
    if not args.no_large:
        configs.append((args.large_model, "stage"))
    return configs


def main() -> int:
    """Measure every configuration at every size, print the tables, write JSON and plot."""
    from anpred.participants import parse_participants

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="yolov8n", help="zoo model or .onnx path")
    parser.add_argument("--large-model", default="yolov8s", help="the larger model (stage)")
    parser.add_argument("--no-layer", action="store_true", help="skip layer granularity")
    parser.add_argument("--no-large", action="store_true", help="skip the larger model")
    parser.add_argument("--libs", help="anpred --libs (default all; quick torch,onnxruntime)")
    parser.add_argument("--sizes", help="comma-separated input counts (default 1,8,32,128)")
    parser.add_argument(
        "--other-sizes",
        help="input counts of layer granularity and the larger model (default: --sizes)",
    )
    parser.add_argument("--quick", action="store_true", help="torch,onnxruntime; sizes 1,2")
    parser.add_argument("--keep-captures", default="needed", choices=("needed", "all"))
    parser.add_argument("--threads", type=int, default=1, help="threads per process")
    parser.add_argument("--parallel", type=int, default=2, help="anpred --parallel")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temp folder)")
    parser.add_argument("--keep-runs", action="store_true", help="keep the run directories")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--plot", type=Path, default=Path("docs/scaling.png"))
    parser.add_argument("--from-json", type=Path, help="re-print and re-plot a --json result")
    args = parser.parse_args()
    if args.from_json:
        report(json.loads(args.from_json.read_text()), args.plot)
        return 0
    if args.quick:
        args.no_layer = args.no_large = True
    libs = args.libs or ("torch,onnxruntime" if args.quick else "all")
    default = "1,2" if args.quick else ",".join(map(str, FULL_SIZES))
    sizes = [int(s) for s in (args.sizes or default).split(",")]
    other_sizes = [int(s) for s in args.other_sizes.split(",")] if args.other_sizes else sizes
    libraries = list(dict.fromkeys(["torch", *(p.library for p in parse_participants(libs))]))
    work = args.work or Path(tempfile.mkdtemp(prefix="anpred-bench-scaling-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["ANPRED_CACHE"] = str(work / "cache")
    os.environ["YOLO_CONFIG_DIR"] = str(work / "yolo")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    configs = _configurations(args)
    _say(f"fresh ANPRED_CACHE {work / 'cache'}: weights, exports, imports (not timed)")
    warm(
        list(dict.fromkeys(m for m, _ in configs)),
        list(dict.fromkeys(g for _, g in configs)),
        libraries,
        work,
    )
    curves: dict[tuple[str, str, bool], Curve] = {}
    for model, granularity in configs:
        name = Path(model).stem
        curve = curves.setdefault(
            (model, granularity, False), Curve(f"anpred {name} {granularity}", model, granularity)
        )
        for n in sizes if (model, granularity) == configs[0] else other_sizes:
            out = work / f"run-{name}-{granularity}-{n}"
            _say(f"anpred run {name} {granularity} anchors, {n} inputs")
            curve.points.append(measure_anpred(model, granularity, n, libs, args, out))
            bare = curves.setdefault((model, "", True), Curve(f"bare {name}", model, "", bare=True))
            if all(p.n != n for p in bare.points):
                _say(f"bare inference {name}, {n} inputs: {', '.join(libraries)}")
                bare.points.append(measure_bare(out, libraries, args.threads, work))
            if not args.keep_runs:
                shutil.rmtree(out, ignore_errors=True)
    ordered = list(curves.values())
    results = {
        "libs": libs,
        "sizes": sizes,
        "other_sizes": other_sizes,
        "keep_captures": args.keep_captures,
        "parallel": args.parallel,
        "measured": time.strftime("%Y-%m-%d %H:%M"),
        "cpus": os.cpu_count(),
        "machine": machine_note(),
        "full": libs == "all" and sizes == other_sizes == FULL_SIZES and len(configs) == 3,
        "curves": [{**asdict(c), "slopes": slopes(c)} for c in ordered],
    }
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    report(results, args.plot)
    return 0


def _curves(results: dict[str, Any]) -> list[Curve]:
    return [
        Curve(
            c["label"],
            c["model"],
            c["granularity"],
            c["bare"],
            [Point(**p) for p in c["points"]],
        )
        for c in results["curves"]
    ]


def report(results: dict[str, Any], plot_path: Path) -> None:
    """Print the tables of ``results`` (what ``--json`` writes) and draw the plot."""
    curves = _curves(results)
    sizes = ",".join(map(str, results["sizes"]))
    other = results.get("other_sizes", results["sizes"])
    if other != results["sizes"]:
        sizes += f" (layer and larger model: {','.join(map(str, other))})"
    print(
        f"## Scaling -- libs {results['libs']}, sizes {sizes}, "
        f"--keep-captures {results['keep_captures']}, --parallel {results['parallel']}\n"
    )
    print(f"{results['machine']}\n")
    rows = []
    for curve in curves:
        for p in curve.points:
            rows.append([
                curve.label, p.n, f"{p.wall_s:.1f}", f"{p.peak_mb:.0f}",
                "" if curve.bare else f"{p.peak_disk_mb:.0f}",
                "" if curve.bare else f"{p.final_disk_mb:.0f}", f"{p.load:.1f}",
            ])  # fmt: skip
    header = ["curve", "inputs", "wall s", "peak MB", "peak disk MB", "disk MB", "load"]
    print(markdown_table(header, rows))
    print("\n### Per-input slopes (least squares over the sizes)\n")
    bare = {c.model: slopes(c)["wall_s"] for c in curves if c.bare}
    srows = []
    for curve in curves:
        s = slopes(curve)
        ratio = s["wall_s"] / bare[curve.model] if bare.get(curve.model) else None
        srows.append([
            curve.label, f"{s['wall_s']:.2f}", "" if ratio is None else f"{ratio:.2f}",
            f"{s['peak_mb']:.1f}", f"{s['peak_disk_mb']:.1f}", f"{s['final_disk_mb']:.1f}",
        ])  # fmt: skip
    print(
        markdown_table(
            ["curve", "s/input", "vs bare", "memory MB/input", "peak disk MB/input",
             "disk MB/input"],
            srows,
        )
    )  # fmt: skip
    loads = [p.load for c in curves for p in c.points]
    load = f"load average (1 min) up to {max(loads):.1f}" if loads else "load unknown"
    title = (
        f"anpred run vs bare inference -- libs {results['libs']}; inputs {sizes}; "
        f"--keep-captures {results['keep_captures']}; {results['measured']}; {load} on "
        f"{results['cpus']} CPUs shared with other work"
    )
    if not results["full"]:
        title += f"\nreduced size; the full curve: {FULL_COMMAND}"
    plot(curves, plot_path, title)
    print(f"\nplot: {plot_path}")


if __name__ == "__main__":
    raise SystemExit(main())
