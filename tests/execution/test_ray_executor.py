"""The Ray executor runs a job as the local one does, in another folder, and brings back
its files: the same outcome for every symptom, the driver's folder complete.

One embedded Ray instance for the module (starting one takes ~5 s here).
"""

from __future__ import annotations

import json
import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from anpred.errors import UsageError
from anpred.execution.executor import (
    Executor,
    JobEnd,
    JobOutcome,
    JobSpec,
    LocalExecutor,
)
from anpred.store import ParticipantStore, Status

pytest.importorskip("ray")

HERE = Path(__file__).resolve().parent
#: Seconds a hanging job may run: long enough to start Python and import anpred.store on a
#: loaded machine (~0.3 s measured), short enough for a fast test.
HANG_LIMIT = 4.0


#: An address no Ray cluster listens on.
DEAD_ADDRESS = "127.0.0.1:9"


def on_sigterm(_signum: int, _frame: object) -> None:
    """The SIGTERM handler installed while Ray starts (anpred's CLI has its own)."""
    raise KeyboardInterrupt


@pytest.fixture(scope="module")
def ray_executor() -> Iterator[Executor]:
    from anpred.execution.ray_executor import RayExecutor

    previous = signal.signal(signal.SIGTERM, on_sigterm)
    # "local" starts an instance of its own even where RAY_ADDRESS names another (here a
    # dead one: joining it would fail) or a `ray start` cluster left its address behind
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("RAY_ADDRESS", DEAD_ADDRESS)
        executor = RayExecutor("local", num_cpus=2)
    try:
        yield executor
    finally:
        executor.close()
        signal.signal(signal.SIGTERM, previous)


def spec(folder: Path, mode: str, asset: Path, limit: float = 120.0, threads: int = 1) -> JobSpec:
    """A ``node_job`` job in ``folder`` that reads ``asset`` and ends as ``mode`` says."""
    path = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH")) if p)
    return JobSpec(
        ParticipantStore(folder),
        {"out": str(folder), "asset": str(asset), "mode": mode},
        "node_job",
        {"PYTHONPATH": path},
        limit,
        threads=threads,
        assets=(asset,),
    )


def finish(executor: Executor, job: JobSpec, budget: float = 300) -> tuple[JobEnd, JobOutcome]:
    """Start ``job``, poll it to its end, collect it; return how it ended and its outcome."""
    running = executor.start(job)
    deadline = time.monotonic() + budget
    while not running.poll():
        assert time.monotonic() < deadline, "the job did not end"
        time.sleep(0.1)
    end = running.collect()
    return end, running.outcome(end)


@pytest.fixture
def asset(tmp_path: Path) -> Path:
    path = tmp_path / "driver-only" / "inputs.txt"
    path.parent.mkdir()
    path.write_text("the inputs")
    return path


@pytest.mark.parametrize("mode", ["ok", "crash", "error", "hang", "nan"])
def test_every_symptom_ends_as_it_does_locally(
    ray_executor: Executor, tmp_path: Path, asset: Path, mode: str
) -> None:
    limit = HANG_LIMIT if mode == "hang" else 120.0
    local_end, local = finish(LocalExecutor(), spec(tmp_path / "local", mode, asset, limit))
    ray_end, remote = finish(ray_executor, spec(tmp_path / "ray", mode, asset, limit))
    expected = {
        "ok": Status.OK,
        "crash": Status.CRASH,
        "error": Status.ERROR,
        "hang": Status.TIMEOUT,
        "nan": Status.NON_FINITE,
    }[mode]
    assert local.status == expected
    assert (remote.status, remote.step, remote.message) == (
        local.status,
        local.step,
        local.message,
    )
    assert ray_end.returncode == local_end.returncode
    assert ray_end.timed_out == local_end.timed_out == (mode == "hang")
    # the status record and what the job wrote before it ended came back to the driver
    assert ParticipantStore(tmp_path / "ray").has_status()
    assert (tmp_path / "ray" / "result.json").exists()


def test_the_job_runs_elsewhere_and_its_files_come_back(
    ray_executor: Executor, tmp_path: Path, asset: Path
) -> None:
    folder = tmp_path / "run" / "captures" / "p"
    folder.mkdir(parents=True)
    (folder / "earlier.txt").write_text("from an earlier attempt")  # e.g. a fault's graphs
    end, outcome = finish(ray_executor, spec(folder, "ok", asset))
    assert outcome.status == Status.OK and end.returncode == 0 and end.where
    result = json.loads((folder / "result.json").read_text())
    # the worker wrote into a folder of its own and read a copy of the asset ...
    assert result["out"] != str(folder) and not result["out"].startswith(str(tmp_path))
    assert result["asset_path"] != str(asset) and result["asset"] == "the inputs"
    # ... with the job folder's files as the driver had them
    assert result["earlier"] == "from an earlier attempt"
    # the driver keeps its own job file (its paths) and gets the log
    assert ParticipantStore(folder).read_job()["out"] == str(folder)
    assert f"node_job ok in {result['out']}" in (folder / "worker.log").read_text()
    assert not Path(result["out"]).exists()  # the node's folder is cleaned up


def test_a_job_larger_than_any_node_is_refused(
    ray_executor: Executor, tmp_path: Path, asset: Path
) -> None:
    with pytest.raises(UsageError, match="largest node"):
        ray_executor.start(spec(tmp_path / "big", "ok", asset, threads=64))


def test_starting_ray_keeps_the_sigterm_handler(ray_executor: Executor) -> None:
    """Ray installs its own; anpred's (SIGTERM stops the workers, exit 130) must stay."""
    assert signal.getsignal(signal.SIGTERM) is on_sigterm


def test_ray_is_told_not_to_report_usage_statistics(ray_executor: Executor) -> None:
    """anpred never phones home: Ray's usage reporting is off in the driver and the nodes."""
    import os

    import ray

    from anpred.execution.ray_executor import USAGE_STATS_ENV

    assert os.environ[USAGE_STATS_ENV] == "0"

    @ray.remote
    def node_setting() -> str | None:
        return os.environ.get(USAGE_STATS_ENV)

    assert ray.get(node_setting.remote()) == "0"


def test_local_starts_its_own_instance_whatever_ray_address_names(ray_executor: Executor) -> None:
    """The fixture started it with RAY_ADDRESS naming a dead cluster."""
    import ray

    assert ray.is_initialized()
    assert not ray.get_runtime_context().gcs_address.endswith(":9")
