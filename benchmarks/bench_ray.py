"""Throughput of a fixed evaluation campaign: the local pool against Ray on 1 and 2 nodes.

The campaign is ``anpred eval`` of a fixed grid on the tiny ONNX CNN of the tests
(``tests/pipeline/tiny_model.py``): a clean run of torch and onnxruntime (plus the fp64
and fp32 references) and one fault run per (stage, fault), each one faulty onnxruntime worker
and its analysis. It runs in this process (``anpred.evaluation.campaign.evaluate``), each
time into a fresh folder, on:

* **local, 1 worker**: the default local process pool, ``--parallel 1`` (fault runs run one
  after the other, as always locally);
* **local, 2 workers**: ``--parallel 2`` (only the clean run's workers overlap);
* **Ray, 1 node** and **Ray, 2 nodes**: a ``ray.cluster_utils.Cluster`` on this machine (a
  head without CPUs and worker nodes of 1 CPU each, each its own raylet), ``--parallel 2``
  fault runs in flight, every worker and every fault run's analysis a Ray task.

Starting and stopping a cluster is timed apart (paid once per campaign). Printed: wall time
and fault runs per minute of each, the 2-node / 1-node throughput ratio and Ray's overhead
on 1 CPU against the local pool on 1 worker, with the load average before and after (the
machine is shared: read the numbers with it). Run::

    python benchmarks/bench_ray.py             # 2 stages x 4 faults = 8 fault runs
    python benchmarks/bench_ray.py --quick     # 2 fault runs (smoke)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "pipeline"))
from tiny_model import tiny_cnn  # noqa: E402

#: The fixed grid (the model's path is added): 2 stages x 4 faults = 8 fault runs.
GRID: dict[str, Any] = {
    "libs": "torch,onnxruntime",
    "faulty": ["onnxruntime"],
    "stages": ["r1", "s2"],
    "images": 1,
    "calibration": 0,
    "faults": [
        {"kind": "bf16", "op": "*", "severities": [1]},
        {"kind": "mantissa", "op": "*", "severities": [7, 10, 14]},
    ],
}
QUICK_FAULTS = [{"kind": "bf16", "op": "*", "severities": [1]}]


def _load() -> str:
    return " ".join(f"{v:.2f}" for v in os.getloadavg())


def _campaign(grid_file: Path, out: Path, parallel: int, executor: Any) -> tuple[float, int]:
    """Run the grid into ``out``; its wall seconds and number of fault runs."""
    from anpred.evaluation.campaign import evaluate
    from anpred.evaluation.grid import load_grid

    start = time.perf_counter()
    results = evaluate(
        load_grid(grid_file), out, say=lambda _m: None, parallel=parallel, executor=executor
    )
    return time.perf_counter() - start, sum(len(r.rows) for r in results)


def _on_cluster(nodes: int) -> Callable[[Path, Path], tuple[float, int, float]]:
    """A runner of the campaign on a fresh cluster of ``nodes`` 1-CPU worker nodes."""

    def run(grid_file: Path, out: Path) -> tuple[float, int, float]:
        os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
        from ray.cluster_utils import Cluster

        from anpred.execution.ray_executor import RayExecutor

        started = time.perf_counter()
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
        try:
            for _ in range(nodes):
                cluster.add_node(num_cpus=1)
            cluster.wait_for_nodes()
            executor = RayExecutor(cluster.address)
            setup = time.perf_counter() - started
            try:
                seconds, runs = _campaign(grid_file, out, 2, executor)
            finally:
                stopping = time.perf_counter()
                executor.close()
        finally:
            cluster.shutdown()
        return seconds, runs, setup + time.perf_counter() - stopping

    return run


def _local(parallel: int) -> Callable[[Path, Path], tuple[float, int, float]]:
    def run(grid_file: Path, out: Path) -> tuple[float, int, float]:
        from anpred.execution.executor import LocalExecutor

        seconds, runs = _campaign(grid_file, out, parallel, LocalExecutor())
        return seconds, runs, 0.0

    return run


def main() -> int:
    """Run the campaign on every executor, print the table and the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="2 fault runs (smoke test)")
    args = parser.parse_args()
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    setups = {
        "local, 1 worker": _local(1),
        "local, 2 workers": _local(2),
        "Ray, 1 node x 1 CPU": _on_cluster(1),
        "Ray, 2 nodes x 1 CPU": _on_cluster(2),
    }
    print(f"load average before: {_load()} ({os.cpu_count()} CPUs)", flush=True)
    results: dict[str, tuple[float, int, float]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-ray-") as tmp:
        root = Path(tmp)
        grid = {"models": [str(tiny_cnn(root / "tiny.onnx"))], **GRID}
        if args.quick:
            grid["faults"] = QUICK_FAULTS
        grid_file = root / "campaign.json"
        grid_file.write_text(json.dumps(grid))
        for index, (name, run) in enumerate(setups.items()):
            results[name] = run(grid_file, root / f"out{index}")
            print(f"  {name}: {results[name][0]:.1f} s (load {_load()})", flush=True)
    print(f"load average after: {_load()}\n")
    print("| executor | campaign s | fault runs | runs / min | cluster start + stop s |")
    print("|---|---|---|---|---|")
    for name, (seconds, runs, setup) in results.items():
        print(f"| {name} | {seconds:.1f} | {runs} | {60 * runs / seconds:.1f} | {setup:.1f} |")
    local1 = results["local, 1 worker"][0]
    one, two = results["Ray, 1 node x 1 CPU"][0], results["Ray, 2 nodes x 1 CPU"][0]
    print(f"\nthroughput, Ray 2 nodes / 1 node: {one / two:.2f}x")
    print(f"throughput, Ray 2 nodes / local pool 1 worker: {local1 / two:.2f}x")
    overhead = 100 * (one / local1 - 1)
    print(f"Ray's overhead on 1 CPU vs the local pool on 1 worker: {overhead:+.0f} %")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
