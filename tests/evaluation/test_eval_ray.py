"""``anpred eval`` on a real multi-node Ray cluster on one machine (issue 16).

``ray.cluster_utils.Cluster``: a head without CPUs and two worker nodes of 1 CPU each, each
its own raylet. A campaign (the tiny ONNX CNN, a faulty onnxruntime at two stages, two fault
kinds) runs there with every fault run's analysis as a Ray task; one worker node is killed
while both nodes are busy; the campaign completes with the local executor's results. A
driver killed mid-campaign resumes from its run store.
"""

from __future__ import annotations

import csv
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
from tiny_model import tiny_cnn  # noqa: E402

from anpred.store import RunStore  # noqa: E402

#: Keys of summary.json that hold results (the rest are timings, pids and settings).
RESULTS = ("findings", "deviation", "noise_floor", "baselines", "localization", "anchors")
#: Four fault runs (two stages x two kinds), each one onnxruntime job plus its analysis.
GRID = {
    "libs": "torch,onnxruntime",
    "faulty": ["onnxruntime"],
    "stages": ["r1", "s2"],
    "images": 1,
    "calibration": 0,
    "faults": [
        {"kind": "bf16", "op": "*", "severities": [1]},
        {"kind": "mantissa", "op": "*", "severities": [10]},
    ],
}


def anpred(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anpred", *args],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )


def faults_csv(out: Path) -> list[dict[str, str]]:
    with open(out / "faults.csv") as table:
        return list(csv.DictReader(table))


def fault_runs(out: Path) -> list[Path]:
    return sorted((out / "tiny" / "faults").iterdir())


def assert_same_runs(got: Path, expected: Path) -> None:
    """Every fault run of ``got`` has ``expected``'s results: summary and deviations."""
    assert faults_csv(got) == faults_csv(expected)
    mine, theirs = fault_runs(got), fault_runs(expected)
    assert [p.name for p in mine] == [p.name for p in theirs] and len(mine) == 4
    for a, b in zip(mine, theirs, strict=True):
        sa, sb = RunStore(a).read_summary(), RunStore(b).read_summary()
        for key in RESULTS:  # same worker code, same analysis: equal, not close
            assert json.dumps(sa[key], sort_keys=True) == json.dumps(sb[key], sort_keys=True)
        rows = [pq.read_table(RunStore(r).deviations_path).to_pylist() for r in (a, b)]
        assert rows[0] == rows[1]


@pytest.fixture(scope="module")
def campaign(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The grid file, and the campaign run by the local executor (the reference)."""
    root = tmp_path_factory.mktemp("campaign")
    model = tiny_cnn(root / "tiny.onnx")
    grid = root / "grid.json"
    grid.write_text(json.dumps({"models": [str(model)], **GRID}))
    local = anpred("eval", "--config", str(grid), "--out", str(root / "local"))
    assert local.returncode == 0, local.stderr[-3000:]
    return grid, root / "local"


@pytest.fixture(scope="module")
def cluster() -> Iterator[object]:
    pytest.importorskip("ray")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 0})
    try:
        cluster.add_node(num_cpus=1)
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        yield cluster
    finally:
        cluster.shutdown()


def test_analysis_pieces_ship_what_the_analysis_reads(tmp_path: Path) -> None:
    """Outputs, graphs, job files and logs stay; linked clean parts are shared pieces."""
    from anpred.execution.ray_analysis import analysis_pieces

    base = RunStore.create(tmp_path / "clean", {"model": "m"})
    base.write_export({"anchors": []})
    base.write_inputs({"a": np.zeros(2, np.float32)}, {"a": "seeded"})
    torch = base.participant("torch").create()
    torch.write_status({"state": "ok"})
    torch.write_job({"out": str(torch.folder)})
    base.write_summary({})
    fault = RunStore.derive(tmp_path / "fault", base, ["torch"], {"model": "m"})
    faulty = fault.participant("onnxruntime!bf16").create()
    faulty.write_status({"state": "ok"})
    (faulty.folder / "model").mkdir()
    fault.model_dir.mkdir()
    fault.write_summary({})
    pieces = {rel: (path, shared) for rel, path, shared in analysis_pieces(fault.root)}
    linked = str(fault.participant("torch").folder.relative_to(fault.root))
    assert pieces[linked][1]  # the clean run's, linked: shared by every fault run
    assert not pieces[str(faulty.folder.relative_to(fault.root))][1]  # this run's own
    assert pieces[fault.inputs_path.name] == (fault.inputs_path, True)
    assert not {fault.summary_path.name, fault.model_dir.name} & set(pieces)


@pytest.mark.slow
def test_a_campaign_survives_a_lost_node_with_the_local_results(
    campaign: tuple[Path, Path], cluster: object, tmp_path: Path
) -> None:
    import ray

    from anpred.errors import DamagedRunError
    from anpred.evaluation.campaign import evaluate
    from anpred.evaluation.grid import load_grid
    from anpred.evaluation.tables import write_tables
    from anpred.execution.ray_executor import RayExecutor
    from anpred.pipeline.analyse import analyse

    grid_file, local = campaign
    out = tmp_path / "ray"
    workers = [n for n in cluster.worker_nodes]  # type: ignore[attr-defined]
    outcome: dict[str, object] = {}
    with RayExecutor(cluster.address) as executor:  # type: ignore[attr-defined]

        def campaign_thread() -> None:
            try:
                outcome["results"] = evaluate(
                    load_grid(grid_file), out, say=lambda _m: None, parallel=2, executor=executor
                )
            except BaseException as err:  # noqa: BLE001 - handed to the test's thread
                outcome["error"] = err

        thread = threading.Thread(target=campaign_thread)
        thread.start()
        # kill a worker node once both are busy (every CPU of the cluster taken): the job
        # or analysis it runs is lost with it
        deadline = time.monotonic() + 300
        while ray.available_resources().get("CPU", 0) > 0 or not (out / "tiny").exists():
            assert thread.is_alive() and time.monotonic() < deadline, "never both busy"
            time.sleep(0.05)
        cluster.remove_node(workers[0])  # type: ignore[attr-defined]
        thread.join(600)
        assert not thread.is_alive() and "error" not in outcome, outcome.get("error")
        analysed = list(executor.analysed)
        # a damaged run directory fails on the node, then here: the local one-line error
        broken = tmp_path / "broken"
        shutil.copytree(fault_runs(out)[0], broken, symlinks=True)
        (broken / "participants.json").write_text("{not json")
        with pytest.raises(DamagedRunError) as local_error:
            analyse(broken)
        with pytest.raises(DamagedRunError) as ray_error:
            executor.analyse(broken, analyse)
        assert str(ray_error.value) == str(local_error.value)
    write_tables(outcome["results"], out)  # type: ignore[arg-type]
    cluster.add_node(num_cpus=1)  # type: ignore[attr-defined]  # two nodes again
    # every fault run was analysed in a Ray task, and its results are the local ones
    assert sorted(Path(a[0]).name for a in analysed) == [p.name for p in fault_runs(out)]
    assert_same_runs(out, local)


@pytest.mark.slow
def test_a_killed_driver_resumes_from_its_run_store(
    campaign: tuple[Path, Path], cluster: object, tmp_path: Path
) -> None:
    grid_file, local = campaign
    out = tmp_path / "ray"
    args = ["eval", "--config", str(grid_file), "--out", str(out), "--parallel", "1"]
    args += ["--ray", cluster.address]  # type: ignore[attr-defined]
    driver = subprocess.Popen(
        [sys.executable, "-m", "anpred", *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "JAX_PLATFORMS": "cpu"},
    )
    try:  # killed (SIGKILL: no clean-up) once the first fault run is finished
        deadline = time.monotonic() + 300
        while not any(RunStore(p).has_summary() for p in _fault_dirs(out)):
            assert driver.poll() is None, "the campaign ended before it was killed"
            assert time.monotonic() < deadline, "no fault run finished"
            time.sleep(0.05)
        driver.send_signal(signal.SIGKILL)
        driver.wait(60)
    finally:
        if driver.poll() is None:
            driver.kill()
    finished = {
        p.name: RunStore(p).summary_path.stat().st_mtime_ns
        for p in _fault_dirs(out)
        if RunStore(p).has_summary()
    }
    # each fault run's row is recorded in the results folder (here: the run store's top) as
    # it ends, so no more rows than finished runs (the kill may fall between the two)
    rows = faults_csv(out) if (out / "faults.csv").exists() else []
    assert 1 <= len(finished) < 4 and len(rows) <= len(finished)
    again = anpred(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "[onnxruntime] already done (resumed)" in again.stderr  # the clean run's
    # the fault runs finished before the kill were read back, not run or analysed again
    for name, stamp in finished.items():
        assert RunStore(out / "tiny" / "faults" / name).summary_path.stat().st_mtime_ns == stamp
    assert_same_runs(out, local)


def _fault_dirs(out: Path) -> list[Path]:
    folder = out / "tiny" / "faults"
    return sorted(folder.iterdir()) if folder.is_dir() else []
