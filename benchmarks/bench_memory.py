"""Peak memory and throughput of the analysis process as the number of inputs grows.

``anpred.pipeline.analyse.analyse`` streams over a run directory one input at a time, so
its peak memory should not depend on the number of inputs. To make many inputs affordable,
the run directories analysed here are **synthetic**: every (participant, input) capture of
a real run (default: a fresh ``anpred run MODEL --images 2``) is reused under new input ids
(``bus-00``, ``zidane-00``, ``bus-01``, ...) by symbolic links to the real ``.npz`` files,
with copies of their small ``.json`` records. The analysis does the same work per input as
on real data (the captures are real), but the population holds duplicates, so findings
differ from a real run with that many photographs; memory and time per input do not.
Symbolic links share the OS page cache: after the first read the data comes from memory,
so the throughput measures the analysis, not the disk.

Each size is analysed in its own fresh process (same environment as the caller, as the
analysis of ``anpred run`` runs in the CLI process), which reports ``ru_maxrss`` (peak
resident memory of the whole process, imports included) and its growth over the state
after imports. With ``--tracemalloc`` it also reports the ``tracemalloc`` peak (Python and
NumPy allocations during ``analyse``); tracing slows the analysis by roughly a third, and
the MB/s column then includes that overhead.
"MB analysed" counts the uncompressed bytes of every anchor array the analysis reads:
all participants' captures and stage-isolation captures plus the fp64 reference, as
stored (float32, float64 for the reference). Target: peak flat within 10 %. Run::

    python benchmarks/bench_memory.py [--source RUN_DIR]            # full: 8 vs 32 inputs
    python benchmarks/bench_memory.py --quick [--source RUN_DIR]    # CI smoke: 2 vs 8
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path
from typing import Any

from workload import PYTHON, machine_note, markdown_table, run_child

SCRIPT = Path(__file__).resolve()
#: The larger size's peak may exceed the smaller one's by at most this fraction.
FLAT_TARGET = 0.10
#: Key of the observer-effect output in capture files (read from metadata, not analysed).
PLAIN_MEMBER = "__plain__.npy"


def synthesize_run(source: Path, dest: Path, n_inputs: int) -> list[str]:
    """Write a run directory with ``n_inputs`` inputs that reuse ``source``'s captures.

    Input ``k`` reuses source input ``k mod m`` (``m`` = the source's inputs) under the id
    ``<source id>-<k // m:02d>``: symbolic links to its ``.npz`` files, copies of its
    ``.json`` records. Returns the new input ids.
    """
    from anpred.store import CAPTURE, ISOLATED, RunStore

    source, dest = source.resolve(), Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    base = RunStore.open(source)
    ids = base.read_input_ids()
    sources = base.read_input_sources()
    new_ids = [f"{ids[k % len(ids)]}-{k // len(ids):02d}" for k in range(n_inputs)]
    origin = {new: ids[k % len(ids)] for k, new in enumerate(new_ids)}
    store = RunStore.create(dest, {**base.read_settings(), "images": n_inputs})
    store.copy_records_from(base)
    store.write_inputs_record(
        new_ids,
        {new: f"duplicate of {old} ({sources.get(old, '')})" for new, old in origin.items()},
    )
    for folder in base.participant_folders():
        target = store.participant(folder.folder.name).create()
        target.copy_status_from(folder)
        for new, old in origin.items():
            for kind in (CAPTURE, ISOLATED):
                target.link_capture_from(folder, old, new, kind)
    return new_ids


def analysed_bytes(run_dir: Path) -> int:
    """Uncompressed bytes of the anchor arrays the analysis of ``run_dir`` reads."""
    from anpred.store import CAPTURE, ISOLATED, RunStore

    store = RunStore(run_dir)
    ids = store.read_input_ids()
    total = 0
    for folder in store.participant_folders():
        for input_id in ids:
            for kind in (CAPTURE, ISOLATED):
                path = folder.arrays_path(input_id, kind)
                if path.exists():
                    with zipfile.ZipFile(path) as archive:
                        total += sum(
                            i.file_size for i in archive.infolist() if i.filename != PLAIN_MEMBER
                        )
    return total


def _analyse(run_dir: str, trace: bool) -> int:
    """Child process: analyse ``run_dir`` and report peak memory and time."""
    import resource
    import tracemalloc

    import pyarrow.parquet  # noqa: F401 - imported lazily by analyse; count it as an import

    from anpred.pipeline.analyse import analyse

    def rss_mb() -> float:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux

    after_imports = rss_mb()
    if trace:
        tracemalloc.start()
    start = time.perf_counter()
    summary = analyse(Path(run_dir))
    seconds = time.perf_counter() - start
    traced = tracemalloc.get_traced_memory()[1] / 2**20 if trace else None
    print(
        json.dumps(
            {
                "seconds": seconds,
                "rss_after_imports_mb": after_imports,
                "rss_peak_mb": rss_mb(),
                "tracemalloc_peak_mb": traced,
                "inputs": len(summary.inputs),
                "participants": len(summary.participants),
            }
        ),
        flush=True,
    )
    return 0


def _source_run(args: argparse.Namespace, work: Path) -> Path:
    if args.source:
        return args.source
    out = work / "source"
    libs = args.libs or ("torch,onnxruntime" if args.quick else "all")
    print(
        f"source run: anpred run {args.model} --libs {libs} --images 2", file=sys.stderr, flush=True
    )
    proc = subprocess.run(
        [
            PYTHON,
            "-m",
            "anpred",
            "run",
            args.model,
            "--libs",
            libs,
            "--images",
            "2",
            "--keep-captures",  # every capture is reused by the synthetic runs
            "all",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
    )
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"source run failed:\n{proc.stderr[-3000:]}")
    return out


def main() -> int:
    """Build the synthetic run directories, analyse each in a fresh process, print tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source",
        type=Path,
        help="a finished run directory to duplicate (default: a fresh "
        "`anpred run MODEL --images 2`)",
    )
    parser.add_argument("--model", default="yolov8n", help="model of the fresh source run")
    parser.add_argument(
        "--libs", help="libraries of the fresh source run (default all; quick torch,onnxruntime)"
    )
    parser.add_argument(
        "--sizes", type=int, nargs="+", help="inputs per synthetic run (default 8 32; quick 2 8)"
    )
    parser.add_argument("--quick", action="store_true", help="sizes 2 8")
    parser.add_argument(
        "--tracemalloc",
        action="store_true",
        help="also trace allocations (tracemalloc peak; slower)",
    )
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temp folder)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument("--analyse", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.analyse:
        return _analyse(args.analyse, args.tracemalloc)
    sizes = args.sizes or ([2, 8] if args.quick else [8, 32])
    work = args.work or Path(tempfile.mkdtemp(prefix="anpred-bench-memory-"))
    source = _source_run(args, work)
    env = dict(os.environ)
    results: list[dict[str, Any]] = []
    for n in sizes:
        run_dir = work / f"synthetic-{n}"
        synthesize_run(source, run_dir, n)
        megabytes = analysed_bytes(run_dir) / 1e6
        print(f"analyse {n} inputs ({megabytes:.0f} MB of anchors)", file=sys.stderr, flush=True)
        child_args = ["--analyse", str(run_dir)] + (["--tracemalloc"] if args.tracemalloc else [])
        result, wall = run_child(SCRIPT, child_args, env)
        results.append({**result, "n": n, "mb": megabytes, "process_wall_s": wall})

    participants = results[0]["participants"]
    print(
        f"## Analysis memory — synthetic runs from {source} ({participants} participants "
        "+ fp64 reference), one fresh process per size\n"
    )
    print(f"{machine_note()}\n")
    header = [
        "inputs",
        "MB analysed",
        "analyse s",
        "MB/s",
        "RSS after imports MB",
        "peak RSS MB",
        "peak growth MB",
    ]
    if args.tracemalloc:
        header.append("tracemalloc peak MB")
    rows = []
    for r in results:
        row = [
            r["n"],
            f"{r['mb']:.0f}",
            f"{r['seconds']:.1f}",
            f"{r['mb'] / r['seconds']:.1f}",
            f"{r['rss_after_imports_mb']:.0f}",
            f"{r['rss_peak_mb']:.0f}",
            f"{r['rss_peak_mb'] - r['rss_after_imports_mb']:.0f}",
        ]
        if args.tracemalloc:
            row.append(f"{r['tracemalloc_peak_mb']:.0f}")
        rows.append(row)
    print(markdown_table(header, rows))
    small, large = results[0], results[-1]
    ratio = large["rss_peak_mb"] / small["rss_peak_mb"]
    growth = (large["rss_peak_mb"] - large["rss_after_imports_mb"]) / max(
        small["rss_peak_mb"] - small["rss_after_imports_mb"], 1e-9
    )
    verdict = "meets" if ratio <= 1 + FLAT_TARGET else "misses"
    print(
        f"\npeak RSS {large['n']} / {small['n']} inputs: {ratio:.2f}× ({verdict} the "
        f"flat-within-{FLAT_TARGET:.0%} target); growth over imports: {growth:.2f}×."
    )
    if args.tracemalloc:
        traced = large["tracemalloc_peak_mb"] / small["tracemalloc_peak_mb"]
        print(f"tracemalloc peak {large['n']} / {small['n']} inputs: {traced:.2f}×.")
    if args.json:
        args.json.write_text(json.dumps({"source": str(source), "results": results}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
