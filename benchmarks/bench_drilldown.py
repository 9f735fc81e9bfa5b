"""Drill-down accuracy and cost: is the faulted operator named, at what wall time.

For each model, library and node: ``anpred inject MODEL --lib LIB --node NODE --fault
KIND`` (one operator faulted), then read the run's ``summary.json`` and check that the
drill-down of the faulty participant at the injected stage names that node. Prints one
markdown row per case: the named operator, whether it is the injected one, the run's wall
time, the drill-down's, and their ratio (drill-down / the run without it).

Nodes: per model a stage and, in it, the first ``Conv`` and the first float operator of
another type (from ``anpred inject MODEL --list-targets --stage STAGE``). Run::

    python benchmarks/bench_drilldown.py --out /tmp/drill-bench [--images 2]
        [--models yolov8n,resnet50,mobilenet_v3_large] [--faulty onnxruntime,jax]
        [--fault bf16] [--severity N]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

from anpred.store import RunStore

#: A middle stage of each model (deep enough to inherit noise, shallow enough to be quick).
STAGES = {
    "yolov8n": "backbone.p3",
    "resnet50": "layer2",
    "mobilenet_v3_large": "features.s3",
    "convnext_tiny": "stage2",
    "yolov5n": "backbone.p3",
}


def _anpred(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anpred", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
        timeout=3600,
    )


def pick_nodes(model: str, stage: str) -> list[tuple[str, str]]:
    """(node, op type): the stage's first Conv and first float op of another type."""
    listed = _anpred("inject", model, "--list-targets", "--stage", stage)
    if listed.returncode:
        raise SystemExit(listed.stderr.strip().splitlines()[-1])
    rows = [line.split() for line in listed.stdout.splitlines() if line.strip()]
    rows = [r for r in rows if "(no" not in r and r[1] not in ("Identity", "Constant")]
    chosen: list[tuple[str, str]] = []
    conv = next((r for r in rows if r[1] == "Conv"), None)
    if conv:
        chosen.append((conv[0], conv[1]))
    other = next(
        (r for r in rows if r[1] not in ("Conv", "Reshape", "Shape", "Concat", "Split")), None
    )
    if other:
        chosen.append((other[0], other[1]))
    return chosen


def one_case(
    model: str,
    lib: str,
    node: str,
    libs: str,
    images: int,
    fault: str,
    out: Path,
    severity: str | None = None,
) -> dict[str, object]:
    """Run one injection; return the row."""
    start = time.perf_counter()
    if RunStore(out).has_summary() and RunStore(out).ground_truth_path.exists():
        return read_case(model, lib, node, fault, severity, out, 0.0)  # done earlier
    fault_args = ["--fault", fault, *(["--severity", severity] if severity else [])]
    run_args = ["--libs", libs, "--images", str(images), "--out", str(out)]
    done = _anpred("inject", model, "--lib", lib, "--node", node, *fault_args, *run_args)
    return read_case(
        model, lib, node, fault, severity, out, time.perf_counter() - start, done.stderr
    )


def read_case(
    model: str,
    lib: str,
    node: str,
    fault: str,
    severity: str | None,
    out: Path,
    wall: float,
    stderr: str = "",
) -> dict[str, object]:
    """The row of a finished case (its run directory)."""
    row: dict[str, object] = {
        "model": model,
        "lib": lib,
        "node": node,
        "fault": f"{fault} {severity}" if severity else fault,
    }
    store = RunStore(out)
    if not store.has_summary():
        row.update(named=None, correct=False, note=stderr.strip()[-300:])
        return row
    summary = store.read_summary()
    truth = store.read_ground_truth()["injected"]
    drill = summary.get("drill") or {}
    target = next(
        (
            t
            for t in drill.get("targets", [])
            if t["participant"] == truth["participant"] and t["stage"] == truth["stage"]
        ),
        None,
    )
    named = None
    if target and target.get("named"):
        named = next(o for o in target["ops"] if o["key"] == target["named"])
    run_wall = float(summary.get("wall_seconds") or wall)
    drill_wall = float(drill.get("wall_seconds") or 0.0)
    row.update(
        stage=truth["stage"],
        flagged=bool(drill),
        named=named["node"] if named else None,
        basis=target.get("basis") if target else None,
        correct=bool(named and named["node"] == node),
        reason=(target or {}).get("reason") or drill.get("reason", ""),
        run_s=round(run_wall - drill_wall, 1),
        drill_s=round(drill_wall, 1),
        ratio=round(drill_wall / max(run_wall - drill_wall, 1e-9), 2),
        n_ops=len(target["ops"]) if target else None,
    )
    return row


def main() -> int:
    """Run every case; print the rows and the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--models", default="yolov8n,resnet50,mobilenet_v3_large")
    parser.add_argument("--faulty", default="onnxruntime,jax")
    parser.add_argument("--libs", default="torch,onnxruntime,openvino,jax")
    parser.add_argument("--images", type=int, default=2)
    parser.add_argument("--fault", default="bf16")
    parser.add_argument("--severity", default=None, help="fault severity (default per fault)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rows = []
    for model in args.models.split(","):
        nodes = pick_nodes(model, STAGES[model])
        for lib in args.faulty.split(","):
            for node, _op in nodes:
                name = f"{model}-{lib}-{node.strip('/').replace('/', '_')}"
                row = one_case(
                    model,
                    lib,
                    node,
                    args.libs,
                    args.images,
                    args.fault,
                    args.out / name,
                    args.severity,
                )
                rows.append(row)
                print(json.dumps(row), flush=True)
    (args.out / "results.json").write_text(json.dumps(rows, indent=1))
    print("\n| model | lib | node | named | ok | run s | drill s | drill/run |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['model']} | {r['lib']} | {r['node']} | {r.get('named')} | "
            f"{'yes' if r['correct'] else 'NO'} | {r.get('run_s')} | {r.get('drill_s')} | "
            f"{r.get('ratio')} |"
        )
    correct = sum(bool(r["correct"]) for r in rows)
    print(f"\nnamed the injected operator in {correct}/{len(rows)} cases")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
