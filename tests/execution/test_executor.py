"""The executor interface without a cluster: the default is local processes with the
environment of before, no Ray import, and the Ray executor's file shipping is lossless.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from anpred.execution.executor import LocalExecutor
from anpred.execution.factory import open_executor
from anpred.execution.pool import job_assets, worker_env, worker_overlay
from anpred.execution.ray_executor import pack, rewrite_paths, unpack


def test_the_default_executor_is_local_and_imports_no_ray() -> None:
    code = (
        "import sys\n"
        "from anpred.execution.factory import open_executor\n"
        "import anpred.execution.ray_executor, anpred.pipeline.run, anpred.cli.commands\n"
        "assert type(open_executor(None, 2, 1)).__name__ == 'LocalExecutor'\n"
        "print('ray' in sys.modules)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "False"
    assert isinstance(open_executor(None, 2, 1), LocalExecutor)
    assert LocalExecutor().slots(3) == 3 and LocalExecutor().slots(0) == 1


def test_the_overlay_is_what_a_worker_env_adds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", "1")  # the caller's own setting wins
    monkeypatch.setenv("OMP_NUM_THREADS", "7")  # thread counts are anpred's
    overlay = worker_overlay(3, {"ANPRED_MEMORY_LIMIT": "5"})
    assert overlay["OMP_NUM_THREADS"] == overlay["ANPRED_THREADS"] == "3"
    assert overlay["TF_CPP_MIN_LOG_LEVEL"] == "1" and overlay["ANPRED_MEMORY_LIMIT"] == "5"
    assert worker_env(3, {"ANPRED_MEMORY_LIMIT": "5"}) == {**os.environ, **overlay}
    assert "PATH" not in overlay  # only what anpred decides travels to another node


def test_job_paths_are_moved_to_the_node_copies() -> None:
    job = {
        "out": "/run/captures/p",
        "inputs": "/run/inputs.npz",
        "model": {"export": {"folder": "/run/model"}, "zoo_model": "run"},
        "transforms": {"p": [{"folder": "/run/captures/p/model", "once": "/elsewhere/x"}]},
        "input_ids": ["/run"],  # a string equal to a prefix is moved; siblings are not
        "other": "/runs/x",
    }
    moved = rewrite_paths(
        job,
        {"/run/captures/p": "/n/job", "/run/inputs.npz": "/n/a/0/inputs.npz", "/run": "/n/r"},
    )
    assert moved["out"] == "/n/job" and moved["inputs"] == "/n/a/0/inputs.npz"
    assert moved["model"] == {"export": {"folder": "/n/r/model"}, "zoo_model": "run"}
    assert moved["transforms"]["p"] == [{"folder": "/n/job/model", "once": "/elsewhere/x"}]
    assert moved["input_ids"] == ["/n/r"] and moved["other"] == "/runs/x"


def test_pack_and_unpack_keep_every_file(tmp_path: Path) -> None:
    source = tmp_path / "source"
    (source / "model").mkdir(parents=True)
    (source / "a.capture.npz").write_bytes(b"\x00arrays")
    (source / "a.capture.json").write_text("{}")
    (source / "model" / "anchored.onnx").write_bytes(b"graph")
    (source / "job.json").write_text("{}")
    os.symlink(source / "a.capture.npz", source / "linked.npz")  # links are followed
    files = pack(source, skip=("job.json",))
    assert sorted(files) == ["a.capture.json", "a.capture.npz", "linked.npz", "model/anchored.onnx"]
    unpack(files, tmp_path / "copy")
    for name, data in files.items():
        assert (tmp_path / "copy" / name).read_bytes() == data
    assert not (tmp_path / "copy" / "job.json").exists()
    assert pack(source / "a.capture.npz") == {"a.capture.npz": b"\x00arrays"}


def test_a_jobs_assets_are_the_files_it_names(tmp_path: Path) -> None:
    inputs = tmp_path / "inputs.npz"
    inputs.write_bytes(b"")
    export = tmp_path / "model"
    export.mkdir()
    job = {
        "inputs": str(inputs),
        "model": {"export": {"folder": str(export)}, "weights": None},
        "isolation_source": str(tmp_path / "not-there-yet"),
    }
    assert job_assets(job) == (inputs, export)


def test_workers_keep_jax_compilations_under_the_anpred_cache(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from anpred.execution.pool import JAX_CACHE_BYTES

    monkeypatch.setenv("ANPRED_CACHE", str(tmp_path))
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    overlay = worker_overlay(1)
    assert overlay["JAX_COMPILATION_CACHE_DIR"] == str(tmp_path / "jax-compilation")
    assert int(overlay["JAX_COMPILATION_CACHE_MAX_SIZE"]) == JAX_CACHE_BYTES
    monkeypatch.setenv("JAX_COMPILATION_CACHE_DIR", "")  # the caller's "no cache" wins
    assert worker_overlay(1)["JAX_COMPILATION_CACHE_DIR"] == ""


@pytest.mark.slow
def test_a_jax_worker_from_the_compilation_cache_captures_the_same_numbers(
    tmp_path: Path,
) -> None:
    import numpy as np

    sys.path.insert(0, str(Path(__file__).parents[1] / "pipeline"))
    from tiny_model import tiny_cnn

    model = tiny_cnn(tmp_path / "tiny.onnx")
    # every compilation is kept (jax keeps only those over 1 s by default)
    env = {**os.environ, "ANPRED_CACHE": str(tmp_path / "cache"),
           "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}  # fmt: skip
    env.pop("JAX_COMPILATION_CACHE_DIR", None)
    compiled = tmp_path / "cache" / "jax-compilation"
    captures = []
    for run in ("first", "cached"):
        out = tmp_path / run
        args = ["run", str(model), "--libs", "jax", "--images", "1", "--out", str(out),
                "--keep-captures", "all", "--no-drill"]  # fmt: skip
        proc = subprocess.run([sys.executable, "-m", "anpred", *args], env=env,
                              capture_output=True, text=True, timeout=600)  # fmt: skip
        assert proc.returncode in (0, 1), proc.stderr[-2000:]
        if run == "first":
            kept = sorted(p.name for p in compiled.iterdir())
            assert len(kept) >= 3  # anchored, plain and isolation programs at least
        folder = out / "captures" / "jax"
        captures.append({f.name: dict(np.load(f)) for f in sorted(folder.glob("*.npz"))})
    assert sorted(p.name for p in compiled.iterdir()) == kept  # all came from the cache
    assert captures[0].keys() == captures[1].keys()
    for name, arrays in captures[0].items():
        for key, value in arrays.items():
            np.testing.assert_array_equal(value, captures[1][name][key])
