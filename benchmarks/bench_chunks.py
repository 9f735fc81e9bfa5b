"""What persistent workers save a chunked run (``anpred run --chunk N``).

A run with more inputs than its chunk goes a chunk at a time (:mod:`anpred.pipeline.chunks`).
Each participant's worker process serves its job of every chunk, on the model it loaded,
translated and compiled for the first one. This benchmark runs the same chunked run twice,
each ``python -m anpred run`` in a fresh process from an empty run folder, timed from
outside (CPU seconds of the process and every descendant): once as anpred runs it, once with
a fresh worker process per participant and chunk (``ANPRED_FRESH_CHUNK_WORKERS=1``, the
path before). Both share one warm ``ANPRED_CACHE`` (the export and weights made beforehand,
not timed) and a fresh JAX compilation cache each. Printed: both runs' CPU seconds, the
ratio, and the CPU saved per worker restart avoided (participants × (chunks - 1)). Run::

    python benchmarks/bench_chunks.py     # yolov8n, all libraries, 8 inputs, chunks of 2
    python benchmarks/bench_chunks.py --images 16 --chunk 4
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workload import PYTHON, machine_note, markdown_table

#: The switch of :mod:`anpred.pipeline.chunks` (read there as ``FRESH_WORKERS_ENV``).
FRESH_ENV = "ANPRED_FRESH_CHUNK_WORKERS"


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_run(args: argparse.Namespace, out: Path, env: dict[str, str], log: Path) -> float:
    """``anpred run`` into ``out`` with ``env``; its CPU seconds."""
    shutil.rmtree(out, ignore_errors=True)
    command = [
        PYTHON, "-m", "anpred", "run", args.model, "--libs", args.libs,
        "--images", str(args.images), "--chunk", str(args.chunk), "--out", str(out),
        "--threads", "1", "--parallel", str(args.parallel), "--no-drill",
    ]  # fmt: skip
    cpu, start = children_cpu(), time.perf_counter()
    with open(log, "w") as handle:
        code = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT, env=env).returncode
    if code != 0:
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise RuntimeError(f"anpred run exited with {code}:\n{tail}")
    print(f"  {log.stem}: {time.perf_counter() - start:.0f} s wall", file=sys.stderr)
    return children_cpu() - cpu


def main() -> int:
    """Run the chunked run both ways and print the comparison."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="yolov8n", help="zoo model (default yolov8n)")
    parser.add_argument("--libs", default="all", help="anpred --libs (default all)")
    parser.add_argument("--images", type=int, default=8, help="inputs (default 8)")
    parser.add_argument("--chunk", type=int, default=2, help="inputs per chunk (default 2)")
    parser.add_argument("--parallel", type=int, default=2, help="anpred --parallel (default 2)")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temp folder)")
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="anpred-bench-chunks-"))
    work.mkdir(parents=True, exist_ok=True)
    base = {**os.environ, "ANPRED_CACHE": str(work / "cache")}
    base.pop(FRESH_ENV, None)
    print(f"# Persistent workers in a chunked run\n\n{machine_note()}\n")
    print("warming the cache (export, weights; not timed)", file=sys.stderr)
    warm = dict(args.__dict__, images=1, chunk=1)
    timed_run(argparse.Namespace(**warm), work / "warm", base, work / "warm.log")
    cpu = {}
    for mode, extra in (("fresh", {FRESH_ENV: "1"}), ("served", {})):
        env = {**base, **extra, "JAX_COMPILATION_CACHE_DIR": str(work / f"jax-{mode}")}
        cpu[mode] = timed_run(args, work / mode, env, work / f"{mode}.log")
    from anpred.store import RunStore

    participants = len(RunStore.open(work / "served").read_participants())
    chunks = -(-args.images // args.chunk)
    restarts = participants * (chunks - 1)
    saved = cpu["fresh"] - cpu["served"]
    print(
        markdown_table(
            ["workers", "CPU s", "ratio"],
            [
                ["a fresh process per participant and chunk", f"{cpu['fresh']:.1f}", "1.00"],
                ["persistent (anpred's)", f"{cpu['served']:.1f}",
                 f"{cpu['served'] / cpu['fresh']:.2f}"],
            ],
        )
    )  # fmt: skip
    print(
        f"\n{args.model}, {args.images} inputs in chunks of {args.chunk} ({chunks} chunks, "
        f"{participants} workers): persistent workers save {saved:.1f} CPU s, "
        f"{saved / max(restarts, 1):.2f} CPU s per worker restart avoided ({restarts} restarts)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
