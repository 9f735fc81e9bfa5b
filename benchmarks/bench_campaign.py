"""Fault runs per CPU-hour of an evaluation campaign (``anpred eval``).

A campaign's CPU goes to its fault runs: each injects one fault into one participant and
judges the run against the clean one. This benchmark runs the yolov8n and resnet50 grids
(``configs/eval-yolov8n-onnxruntime.json``, faulty onnxruntime, 48 fault runs;
``configs/eval-resnet50-tensorflow.json``, faulty tensorflow, 30), each ``python -m anpred
eval`` in a fresh process, timed from outside (CPU seconds of the process and every
descendant, ``getrusage(RUSAGE_CHILDREN)``):

1. the grid with no faults: the clean run and the calibration run (the campaign's fixed
   cost per model);
2. from a copy of that folder, the grid with one fault that applies nowhere (an op the
   model lacks): what every ``anpred eval`` of a model with something to run pays besides
   its fault runs (the clean and calibration runs judged again, the tables and plots);
3. the grid's faults, twice from copies of that folder: once served (``--fault-workers
   served``, the default: one process per faulty library runs the fault runs in turn, each
   recomputing only the anchors its fault reaches from the clean participant's captures,
   and each run's analysis reading only what its fault changed) and once the path it
   replaces (``--fault-workers fresh``: one worker process per fault run, the whole faulty
   model, a pass over every capture).

``fault runs per CPU-hour`` is the fault runs of step 3 over its CPU hours, served, with
the ratio to the fresh path measured in the same run; and again less step 2's CPU (what a
fault run adds to a campaign). The fixed cost of step 1 is printed beside, and the whole
campaign's rate with it. The two paths' ``faults.csv`` must hold the same decisions: every
column but the two measured distances equal, those within 1e-9 relative
(``--faults-csv-like DIR`` compares them with another campaign's, same grid). ``--slice``
runs a slice instead (minutes): the grid's first fault axis at its first severity and its
last axis at its last, at the first and the middle stage, 4 fault runs per grid. Run::

    python benchmarks/bench_campaign.py                  # both grids (about half an hour)
    python benchmarks/bench_campaign.py --grids yolov8n  # one
    python benchmarks/bench_campaign.py --slice          # 4 fault runs per grid
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from workload import PYTHON, machine_note, markdown_table

ROOT = Path(__file__).resolve().parents[1]
GRIDS = {
    "yolov8n": ROOT / "configs" / "eval-yolov8n-onnxruntime.json",
    "resnet50": ROOT / "configs" / "eval-resnet50-tensorflow.json",
}
#: A fault that applies nowhere in either model (no such op): step 2's grid.
NOWHERE = {"kind": "bf16", "op": "Einsum"}
#: Columns of ``faults.csv`` that are measured numbers, not decisions.
MEASURED = ("output_rel_l2_vs_fp64", "stage_rel_l2_vs_fp64")


def children_cpu() -> float:
    """CPU seconds (user + system) of every child process waited for so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def slice_faults(grid: dict[str, Any]) -> list[dict[str, Any]]:
    """The slice's fault axes: the first axis at its first severity, the last at its last."""
    first, last = grid["faults"][0], grid["faults"][-1]
    return [
        {**first, "severities": first["severities"][:1]},
        {**last, "severities": last["severities"][-1:]},
    ]


def eval_step(
    grid: dict[str, Any],
    out: Path,
    args: argparse.Namespace,
    log: Path,
    extra: tuple[str, ...] = (),
) -> float:
    """Run ``anpred eval`` on ``grid`` into ``out`` (``extra``: more flags); return its CPU
    seconds.
    """
    config = log.with_suffix(".json")
    config.write_text(json.dumps(grid))
    command = [
        PYTHON, "-m", "anpred", "eval", "--config", str(config), "--out", str(out),
        "--threads", str(args.threads), "--parallel", str(args.parallel), *extra,
    ]  # fmt: skip
    cpu = children_cpu()
    start = time.perf_counter()
    with open(log, "w") as handle:
        code = subprocess.run(command, stdout=handle, stderr=subprocess.STDOUT).returncode
    if code != 0:
        tail = "\n".join(log.read_text().splitlines()[-15:])
        raise RuntimeError(f"anpred eval exited with {code}:\n{tail}")
    print(f"  {log.stem}: {time.perf_counter() - start:.0f} s wall", file=sys.stderr)
    return children_cpu() - cpu


def stage_anchors(out: Path, model: str) -> list[str]:
    """The clean run's stage anchors (every anchor but the output), in order."""
    summary = json.loads((out / model / "clean" / "summary.json").read_text())
    return [a["key"] for a in summary["anchors"]][:-1]


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a ``faults.csv``."""
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def same_decisions(rows: list[dict[str, str]], other: list[dict[str, str]]) -> list[str]:
    """Differences between two ``faults.csv`` tables (empty: the same decisions)."""
    if len(rows) != len(other):
        return [f"{len(rows)} rows against {len(other)}"]
    differ = []
    for i, (a, b) in enumerate(zip(rows, other, strict=True)):
        for column in sorted(set(a) | set(b)):
            x, y = a.get(column), b.get(column)
            if column in MEASURED and x and y:
                if not math.isclose(float(x), float(y), rel_tol=1e-9, abs_tol=0.0):
                    differ.append(f"row {i} {column}: {x} vs {y}")
            elif x != y:
                differ.append(f"row {i} {column}: {x} vs {y}")
    return differ


def measure(model: str, args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The steps of one grid's slice; the rates of both paths, the fixed cost and the rows."""
    grid = json.loads(GRIDS[model].read_text())
    out = work / f"eval-{model}"
    print(f"{model}: clean and calibration runs ({GRIDS[model].name}, no faults)", file=sys.stderr)
    clean = {**grid, "faults": []}
    fixed = eval_step(clean, out, args, work / f"{model}-clean.log")
    stages = stage_anchors(out, model)
    fixed_out = work / f"eval-{model}-fixed"
    shutil.rmtree(fixed_out, ignore_errors=True)
    shutil.copytree(out, fixed_out, symlinks=True)
    nowhere = {**grid, "faults": [{**NOWHERE, "severities": [1]}], "stages": stages[:1]}
    resumed = eval_step(nowhere, fixed_out, args, work / f"{model}-fixed.log")
    if args.slice:
        chosen = [stages[0], stages[len(stages) // 2]]
        sliced = {**grid, "faults": slice_faults(grid), "stages": chosen}
    else:
        chosen, sliced = stages, {**grid, "stages": stages}
    fresh_out = work / f"eval-{model}-fresh"
    shutil.rmtree(fresh_out, ignore_errors=True)
    shutil.copytree(out, fresh_out, symlinks=True)
    print(f"{model}: fault runs at {', '.join(chosen)}", file=sys.stderr)
    cpu = {}
    for mode, folder in (("fresh", fresh_out), ("served", out)):
        cpu[mode] = eval_step(
            sliced, folder, args, work / f"{model}-faults-{mode}.log", ("--fault-workers", mode)
        )
    rows = read_rows(out / "faults.csv")
    fresh_rows = read_rows(fresh_out / "faults.csv")
    n = len(rows)
    return {
        "model": model,
        "grid": str(GRIDS[model].relative_to(ROOT)),
        "slice": sliced,
        "fault_runs": n,
        "fixed_cpu_s": fixed,
        "resumed_cpu_s": resumed,
        "faults_cpu_s": cpu["served"],
        "fresh_faults_cpu_s": cpu["fresh"],
        "per_cpu_hour": n / (cpu["served"] / 3600),
        "fresh_per_cpu_hour": n / (cpu["fresh"] / 3600),
        "marginal_per_cpu_hour": n / (max(cpu["served"] - resumed, 1e-9) / 3600),
        "fresh_marginal_per_cpu_hour": n / (max(cpu["fresh"] - resumed, 1e-9) / 3600),
        "campaign_per_cpu_hour": n / ((fixed + cpu["served"]) / 3600),
        "same_as_fresh": same_decisions(rows, fresh_rows),
        "rows": rows,
    }


def main() -> int:
    """Run the grids (or slices) and print the rates."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--grids", default=",".join(GRIDS), help=f"comma-separated of {', '.join(GRIDS)}"
    )
    parser.add_argument("--threads", type=int, default=1, help="threads per worker (default 1)")
    parser.add_argument("--parallel", default="2", help="anpred eval --parallel (default 2)")
    parser.add_argument("--work", type=Path, help="scratch folder (default: a temp folder)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    parser.add_argument(
        "--slice", action="store_true", help="4 fault runs per grid instead of the whole grid"
    )
    parser.add_argument(
        "--faults-csv-like",
        type=Path,
        metavar="DIR",
        help="a --work folder of another campaign (same slice): compare faults.csv decisions",
    )
    args = parser.parse_args()
    models = [m for m in args.grids.split(",") if m]
    unknown = sorted(set(models) - set(GRIDS))
    if unknown:
        parser.error(f"unknown grids {unknown}; known: {', '.join(GRIDS)}")
    work = args.work or Path(tempfile.mkdtemp(prefix="anpred-bench-campaign-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["ANPRED_CACHE"] = str(work / "cache")  # fresh: exports and caches are its own
    print(f"# Fault runs per CPU-hour (`anpred eval`)\n\n{machine_note()}\n")
    results = []
    for model in models:
        results.append(measure(model, args, work))
        if args.json:
            args.json.write_text(json.dumps(results, indent=1))
    grid_title = "grid (slice)" if args.slice else "grid"
    print(
        markdown_table(
            [grid_title, "fault runs", "workers", "their CPU s", "CPU s per fault run",
             "fault runs per CPU-hour", "less step 2: per fault run (CPU s)",
             "per CPU-hour"],
            [
                row
                for r in results
                for row in (
                    [r["grid"], r["fault_runs"], "served", f"{r['faults_cpu_s']:.0f}",
                     f"{r['faults_cpu_s'] / r['fault_runs']:.1f}", f"{r['per_cpu_hour']:.0f}",
                     f"{(r['faults_cpu_s'] - r['resumed_cpu_s']) / r['fault_runs']:.1f}",
                     f"{r['marginal_per_cpu_hour']:.0f}"],
                    [r["grid"], r["fault_runs"], "fresh", f"{r['fresh_faults_cpu_s']:.0f}",
                     f"{r['fresh_faults_cpu_s'] / r['fault_runs']:.1f}",
                     f"{r['fresh_per_cpu_hour']:.0f}",
                     f"{(r['fresh_faults_cpu_s'] - r['resumed_cpu_s']) / r['fault_runs']:.1f}",
                     f"{r['fresh_marginal_per_cpu_hour']:.0f}"],
                )
            ],
        )
    )  # fmt: skip
    print()
    print(
        markdown_table(
            ["grid", "clean + calibration CPU s", "step 2 (no fault run) CPU s",
             "campaign (all) per CPU-hour", "faults.csv served vs fresh"],
            [
                [r["grid"], f"{r['fixed_cpu_s']:.0f}", f"{r['resumed_cpu_s']:.0f}",
                 f"{r['campaign_per_cpu_hour']:.0f}",
                 "identical decisions" if not r["same_as_fresh"]
                 else f"{len(r['same_as_fresh'])} differences"]
                for r in results
            ],
        )
    )  # fmt: skip
    for r in results:
        for line in r["same_as_fresh"][:10]:
            print(f"  {r['model']}: {line}")
    if args.faults_csv_like:
        for r in results:
            other = read_rows(args.faults_csv_like / f"eval-{r['model']}" / "faults.csv")
            differ = same_decisions(r["rows"], other)
            verdict = "identical decisions" if not differ else f"{len(differ)} differences"
            print(f"\n{r['model']} faults.csv vs {args.faults_csv_like}: {verdict}")
            for line in differ[:10]:
                print(f"  {line}")
    runs = sum(r["fault_runs"] for r in results)
    served = sum(r["faults_cpu_s"] for r in results)
    fresh = sum(r["fresh_faults_cpu_s"] for r in results)
    resumed = sum(r["resumed_cpu_s"] for r in results)
    names = " and ".join(models)
    print(
        f"\nfault runs per CPU-hour: {runs / (served / 3600):.0f}  ({names} "
        f"{'slices' if args.slice else 'grids'}; "
        f"one worker per fault run: {runs / (fresh / 3600):.0f}; ratio {fresh / served:.2f})"
    )
    print(
        f"less step 2's part (what a fault run adds to a campaign of many): "
        f"{runs / ((served - resumed) / 3600):.0f} against {runs / ((fresh - resumed) / 3600):.0f}"
        f" (ratio {(fresh - resumed) / (served - resumed):.2f})"
    )
    return 1 if any(r["same_as_fresh"] for r in results) else 0


if __name__ == "__main__":
    raise SystemExit(main())
