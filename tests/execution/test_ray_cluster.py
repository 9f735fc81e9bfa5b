"""A real multi-node Ray cluster on one machine (``ray.cluster_utils.Cluster``: a head and
worker nodes, each its own raylet with its own CPUs): a job whose node is lost while it runs
is run again on another node, and its files reach the driver once.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from anpred.execution.executor import JobSpec
from anpred.store import ParticipantStore, Status

pytest.importorskip("ray")

HERE = Path(__file__).resolve().parent


@pytest.mark.slow
def test_a_job_whose_node_dies_is_retried_on_another_node(tmp_path: Path) -> None:
    from ray.cluster_utils import Cluster

    from anpred.execution.ray_executor import RayExecutor

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        first = cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        asset = tmp_path / "inputs.txt"
        asset.write_text("the inputs")
        attempts = tmp_path / "attempts"
        folder = tmp_path / "run" / "captures" / "p"
        path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
        spec = JobSpec(
            ParticipantStore(folder),
            {
                "out": str(folder),
                "asset": str(asset),
                "mode": "slow",
                "seconds": 5,
                "attempts": str(attempts),
            },
            "node_job",
            {"PYTHONPATH": path},
            120.0,
            assets=(asset,),
        )
        with RayExecutor(cluster.address) as executor:
            running = executor.start(spec)
            deadline = time.monotonic() + 120
            while not (attempts.exists() and attempts.read_text().strip()):
                assert time.monotonic() < deadline, "the job never started"
                time.sleep(0.1)
            # the only node with CPUs is lost mid-job; a fresh one joins
            cluster.add_node(num_cpus=1)
            cluster.remove_node(first)
            while not running.poll():
                assert time.monotonic() < deadline + 120, "the job did not end"
                time.sleep(0.2)
            end = running.collect()
            outcome = running.outcome(end)
        assert outcome.status == Status.OK and end.returncode == 0
        assert len(attempts.read_text().split()) == 2  # lost once, run again, not more
        result = json.loads((folder / "result.json").read_text())
        assert result["asset"] == "the inputs"
        assert ParticipantStore(folder).read_status()["state"] == Status.OK
    finally:
        cluster.shutdown()
