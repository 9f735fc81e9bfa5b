"""The deployment-runtime framework (ConvertedRunner) end to end, with a fake runtime.

``fake_runtime.py`` converts by copying the ONNX file and runs it in onnxruntime, handing
outputs back channels-last, without the batch dimension or reordered, so that output
mapping, the conversion cache, conversion failures, "isolation unavailable" and the
runtime's own environment (its Python, this clone's anpred on PYTHONPATH) are tested
without any real runtime installed.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
FAKES = [
    "fake",
    "fake[nobatch]",
    "fake[reorder]",
    "fake[fail]",
    "fake[noisolation]",
    "fake[network]",
]


def _tiny_cnn(path: Path) -> Path:
    source = ROOT / "tests" / "pipeline" / "tiny_model.py"
    spec = importlib.util.spec_from_file_location("tiny_model", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tiny_cnn(path)


def fake_environment(tmp: Path) -> dict[str, str]:
    """A built "fake" runtime environment: a Python that logs its PYTHONPATH, then runs
    this interpreter; recorded as setup-runtimes.sh records one.
    """
    prefix = tmp / "rt-fake"
    (prefix / "bin").mkdir(parents=True)
    python = prefix / "bin" / "python"
    python.write_text(
        f'#!/bin/sh\necho "$PYTHONPATH" >> "{tmp / "env-used.txt"}"\nexec "{sys.executable}" "$@"\n'
    )
    python.chmod(0o755)
    (prefix / ".ready").touch()
    locks = tmp / "locks"
    locks.mkdir()
    (locks / "fake.txt").write_text("# the fake runtime's lock\n")
    lock = hashlib.sha256((locks / "fake.txt").read_bytes()).hexdigest()[:16]
    site = [p for p in sys.path if p.endswith("site-packages")]
    record = {"fake": {"python": str(python), "prefix": str(prefix), "lock": lock, "site": site}}
    (tmp / "envs.json").write_text(json.dumps(record))
    pythonpath = os.pathsep.join(p for p in (str(HERE), os.environ.get("PYTHONPATH", "")) if p)
    return {
        **os.environ,
        "ANPRED_PLUGINS": "fake_runtime",
        "PYTHONPATH": pythonpath,
        "FAKE_RUNTIME_ENV": "fake",
        "ANPRED_RUNTIME_ENVS": str(tmp / "envs.json"),
        "ANPRED_RUNTIME_LOCKS": str(locks),
        "ANPRED_CACHE": str(tmp / "cache"),
        "FAKE_RUNTIME_LOG": str(tmp / "conversions.log"),
    }


def _run(env: dict[str, str], model: Path, out: Path, libs: list[str]) -> dict:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "anpred",
            "run",
            str(model),
            "--libs",
            ",".join(libs),
            "--images",
            "2",
            "--keep-captures",  # the captures are counted
            "all",
            "--out",
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=800,
    )
    # exit code 3: a participant failed (fake[fail]); the run itself went through
    assert proc.returncode == 3, proc.stdout[-2000:] + proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    return {p["participant"]: p for p in summary["participants"]}


def _folder(out: Path, name: str) -> Path:
    return out / "captures" / name.replace("[", "_").rstrip("]")


def _json(path: Path) -> dict:
    return json.loads(path.read_text())


@pytest.fixture(scope="module")
def fake_runs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict, Path, dict, Path]:
    tmp = tmp_path_factory.mktemp("fake")
    env = fake_environment(tmp)
    model = _tiny_cnn(tmp / "tiny.onnx")
    first = _run(env, model, tmp / "run1", ["torch", *FAKES])
    log_after_first = (tmp / "conversions.log").read_text()
    second = _run(env, model, tmp / "run2", ["torch", "fake", "fake[fail]"])
    assert (tmp / "conversions.log").read_text() == log_after_first  # all from the cache
    return tmp / "run1", first, tmp / "run2", second, tmp


def test_outputs_come_back_mapped_to_anchors_and_aligned(fake_runs: tuple) -> None:
    out, by_name, *_ = fake_runs
    for name in ("fake", "fake[nobatch]", "fake[reorder]", "fake[noisolation]", "fake[network]"):
        assert by_name[name]["status"] == "ok", by_name[name]
    # onnxruntime ran the same graph: within fp32 noise of torch (the bound of
    # tests/library/test_dummy_library_run.py on this graph: rel_l2 <= 5.9e-7 measured).
    # A wrong mapping (an NHWC array read as NCHW, anchors swapped) is O(1).
    rows = pq.read_table(out / "deviations.parquet").to_pylist()
    fake_rows = [r for r in rows if r["participant"].startswith("fake")]
    assert len(fake_rows) == 5 * 2 * 3  # participants x inputs x anchors
    assert all(r["rel_l2"] < 1e-5 for r in fake_rows), fake_rows


def test_the_mapping_rule_and_layouts_are_recorded(fake_runs: tuple) -> None:
    out, *_ = fake_runs
    maps = {
        name: _json(_folder(out, name) / "conversion.json")["models"]["anchored"]["output_map"]
        for name in ("fake", "fake[nobatch]", "fake[reorder]")
    }
    layouts = {n: {o["anchor"]: o["layout"] for o in m["outputs"]} for n, m in maps.items()}
    assert maps["fake"]["rule"] == "order" and maps["fake[nobatch]"]["rule"] == "order"
    four_d = [k for k, v in layouts["fake"].items() if len(v) == 4]
    assert four_d and all(layouts["fake"][k] == "NHWC" for k in four_d)
    assert all(layouts["fake[nobatch]"][k] == "CHW" for k in four_d)
    assert layouts["fake[nobatch]"]["output"] == "C"
    # reversed order: the shapes (all different in this model) decide
    assert maps["fake[reorder]"]["rule"] == "shape"
    indexes = [o["index"] for o in maps["fake[reorder]"]["outputs"]]
    assert indexes == sorted(indexes, reverse=True)


def test_a_failed_conversion_is_the_participants_error_at_step_convert(fake_runs: tuple) -> None:
    out, first, _, second, _ = fake_runs
    for by_name in (first, second):  # the second run's failure came from the cache
        failed = by_name["fake[fail]"]
        assert failed["status"] == "error", failed
        assert failed["message"] == "conversion failed: fake converter: op Conv is not supported"
    status = _json(_folder(out, "fake[fail]") / "status.json")
    assert status["step"] == "convert"
    assert first["torch"]["status"] == "ok" and first["fake"]["status"] == "ok"


def test_conversions_are_cached_per_model_runtime_configuration(fake_runs: tuple) -> None:
    out1, _, out2, _, tmp = fake_runs
    first = _json(_folder(out1, "fake") / "conversion.json")["models"]
    again = _json(_folder(out2, "fake") / "conversion.json")["models"]
    assert not first["anchored"]["cached"] and again["anchored"]["cached"]
    assert again["anchored"]["cache_key"] == first["anchored"]["cache_key"]
    nobatch = _json(_folder(out1, "fake[nobatch]") / "conversion.json")["models"]
    assert nobatch["anchored"]["cache_key"] != first["anchored"]["cache_key"]  # settings
    assert first["plain"]["cache_key"] != first["anchored"]["cache_key"]  # model bytes
    lines = (tmp / "conversions.log").read_text().splitlines()
    assert lines.count("nhwc anchored") == 1 and lines.count("fail anchored") == 1


def test_isolation_unavailable_is_recorded_and_the_participant_goes_on(fake_runs: tuple) -> None:
    out, by_name, *_ = fake_runs
    folder = _folder(out, "fake[noisolation]")
    status = _json(folder / "status.json")
    assert by_name["fake[noisolation]"]["status"] == "ok"
    assert status["isolation"] == (
        "isolation unavailable: conversion failed: fake converter: fed anchors are not "
        "supported (isolation model)"
    )
    assert not list(folder.glob("*.isolated.npz")) and len(list(folder.glob("*.capture.npz"))) == 2
    assert len(list(_folder(out, "fake").glob("*.isolated.npz"))) == 2  # the others isolate


def test_runtime_workers_run_their_environments_python_with_this_clones_anpred(
    fake_runs: tuple,
) -> None:
    out, *_, tmp = fake_runs
    used = (tmp / "env-used.txt").read_text().splitlines()
    assert len(used) == len(FAKES) + 2  # every fake worker of both runs, nothing else
    assert all(line.split(os.pathsep)[0] == str(ROOT / "src") for line in used)
    offline = _json(_folder(out, "fake") / "status.json")["offline"]
    assert offline == {"guarded": True, "refused": 0, "blocked": []}


def test_the_offline_guard_refuses_and_records_network_and_pip(fake_runs: tuple) -> None:
    out, by_name, *_, tmp = fake_runs
    status = _json(_folder(out, "fake[network]") / "status.json")
    assert by_name["fake[network]"]["status"] == "ok"  # the converter went on offline
    kinds = [b["kind"] for b in status["offline"]["blocked"]]
    # four refusals per conversion: the anchored, plain and isolation models
    assert kinds[:4] == [
        "network connection to",
        "name lookup of",
        "installer process",
        "installer process",
    ], status["offline"]
    assert status["offline"]["refused"] == 12 and kinds == kinds[:4] * 3
    key = _json(_folder(out, "fake[network]") / "conversion.json")["models"]["anchored"]
    attempts = (Path(key["folder"]) / "attempts.txt").read_text().split()
    assert attempts == ["NetworkBlocked", "gaierror", "InstallBlocked", "InstallBlocked"]


def test_runtime_only_settings_stay_out_of_the_conversion_key() -> None:
    # ncnn's fp16/bf16 flags are read by ncnn.Net only: converting again for them was waste.
    # (A runner defined here: importing fake_runtime would register "fake" in this process.)
    from anpred.backends.converted import ConvertedRunner

    class Runtime(ConvertedRunner):
        runtime_settings = ("bf16_storage",)
        converter_version = convert_impl = load_impl = run_impl = None  # type: ignore

    runner = Runtime({"bf16_storage": True, "fp16_weights": True, "threads": 2})
    assert runner.conversion_settings() == {"fp16_weights": True, "threads": 2}
