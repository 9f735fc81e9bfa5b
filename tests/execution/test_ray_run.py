"""``anpred run --ray local``: the same results as a local run, symptoms recorded as locally,
the driver's run directory complete and resumable.

The workers run in Ray tasks, each in a temporary folder of its own; everything the analysis
reads must still be in ``--out``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
from tiny_model import tiny_cnn  # noqa: E402

pytest.importorskip("ray")

LIBS = "torch,onnxruntime"
RUN_FAILING = Path(__file__).parents[1] / "pipeline" / "run_failing.py"
#: Keys of summary.json that hold results (the rest are timings, pids and settings).
RESULTS = ("findings", "deviation", "noise_floor", "baselines", "localization", "anchors")


def anpred(*args: str, failing: str | None = None) -> subprocess.CompletedProcess[str]:
    """``anpred ARGS`` (with one participant failing: ``PARTICIPANT:SYMPTOM[:ONCE]``)."""
    command = [str(RUN_FAILING), failing, *args[1:]] if failing else ["-m", "anpred", *args]
    return subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, timeout=600, env=os.environ
    )


def summary(run_dir: Path) -> dict:
    return json.loads((run_dir / "summary.json").read_text())


def rows(run_dir: Path) -> list[dict]:
    table = pq.read_table(run_dir / "deviations.parquet").to_pylist()
    return sorted(table, key=lambda r: (r["participant"], r["input"], r["anchor"]))


@pytest.mark.slow
def test_a_ray_run_equals_a_local_run_and_records_a_crash(tmp_path: Path) -> None:
    model = tiny_cnn(tmp_path / "tiny.onnx")
    args = ["run", str(model), "--libs", LIBS, "--images", "2"]
    local = anpred(*args, "--out", str(tmp_path / "local"))
    assert local.returncode == 0, local.stderr[-2000:]

    # a transient crash of onnxruntime's worker in its Ray task: recorded as locally
    out = tmp_path / "ray"
    once = f"onnxruntime:crash:{tmp_path / 'crashed-once'}"
    crashed = anpred(*args, "--out", str(out), "--ray", "local", failing=once)
    assert crashed.returncode == 3, crashed.stderr[-2000:]
    by_name = {p["participant"]: p for p in summary(out)["participants"]}
    assert by_name["onnxruntime"]["status"] == "crash"
    assert by_name["onnxruntime"]["step"] == "execute"
    assert "signal 9" in by_name["onnxruntime"]["message"]
    assert by_name["torch"]["status"] == "ok"  # the others are kept
    # the driver's run directory holds every capture and status, though no worker ran in it
    torch = out / "captures" / "torch"
    assert len(list(torch.glob("*.capture.npz"))) == len(list(torch.glob("*.isolated.npz"))) == 2
    assert json.loads((torch / "status.json").read_text())["state"] == "ok"
    assert "[anpred] Ray task on" in (torch / "worker.log").read_text()
    assert json.loads((torch / "job.json").read_text())["out"] == str(torch)

    # the same command resumes from the driver's run store: only onnxruntime runs again
    resumed = anpred(*args, "--out", str(out), "--ray", "local", failing=once)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert "[torch] already done (resumed)" in resumed.stderr
    assert "[onnxruntime] started" in resumed.stderr
    expected, got = summary(tmp_path / "local"), summary(out)
    for key in RESULTS:  # same worker code: the numbers are equal, not close
        assert json.dumps(got[key], sort_keys=True) == json.dumps(expected[key], sort_keys=True)
    assert rows(out) == rows(tmp_path / "local")


@pytest.mark.slow
def test_an_evaluation_on_ray_equals_a_local_one(tmp_path: Path) -> None:
    import csv

    model = tiny_cnn(tmp_path / "tiny.onnx")
    grid = tmp_path / "grid.json"
    grid.write_text(
        json.dumps(
            {
                "models": [str(model)],
                "libs": LIBS,
                "faulty": ["onnxruntime"],
                "stages": ["r1", "s2"],
                "images": 1,
                "faults": [{"kind": "bf16", "op": "*", "severities": [1]}],
            }
        )
    )
    tables = {}
    for name, extra in (("local", []), ("ray", ["--ray", "local", "--parallel", "2"])):
        proc = anpred("eval", "--config", str(grid), "--out", str(tmp_path / name), *extra)
        assert proc.returncode == 0, proc.stderr[-3000:]
        with open(tmp_path / name / "faults.csv") as table:
            tables[name] = list(csv.DictReader(table))
    # two fault runs were in flight at once on Ray; the rows are the same, in the same order
    assert [r["stage"] for r in tables["ray"]] == ["r1", "s2"]
    assert tables["ray"] == tables["local"]


@pytest.mark.slow
def test_a_fault_run_in_chunks_on_ray_equals_one_in_one_go_locally(tmp_path: Path) -> None:
    """Chunks on Ray: each chunk's workers in Ray tasks, analysed and pruned in the driver
    (the fp64 reference's too), the drill-down computing the pruned stage inputs again in a
    Ray task; statistics, findings and drill-down are those of a local run in one go."""
    import gzip

    model = tiny_cnn(tmp_path / "tiny.onnx")
    args = ["inject", str(model), "--lib", "onnxruntime", "--stage", "s2", "--fault", "bf16"]
    args += ["--libs", "torch,onnxruntime,openvino", "--images", "3"]
    runs = {"local": ["--chunk", "0"], "ray": ["--chunk", "1", "--ray", "local"]}
    for name, extra in runs.items():
        proc = anpred(*args, *extra, "--out", str(tmp_path / name))
        assert proc.returncode == 1, proc.stderr[-3000:]  # findings
    assert "chunk 3/3" in proc.stderr and "pruned inputs computed again" in proc.stderr
    local, ray = summary(tmp_path / "local"), summary(tmp_path / "ray")
    assert local["findings"] and local["drill"]["targets"]
    for run in (local, ray):
        run["drill"].pop("wall_seconds")
    for key in (*RESULTS, "drill"):
        assert json.dumps(ray[key], sort_keys=True) == json.dumps(local[key], sort_keys=True), key
    stats = [gzip.decompress((tmp_path / n / "statistics.json.gz").read_bytes()) for n in runs]
    assert stats[0] == stats[1]
