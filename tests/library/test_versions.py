"""Library releases as participants (``onnxruntime@1.17.3``): parsing, bad input, the release
environment, a run of an old and the current onnxruntime, the bit-identical note.

The release environments live in the shared cache (``ANPRED_VERSIONS_CACHE``, default
``~/.cache/anpred/versions``): built once (onnxruntime 1.17.3: 44 s, 273 MB measured), then
reused by every test session. A test that needs one builds it when the package index can be
reached, and is skipped with the reason when it cannot. torch@2.0.1 (3.4 GB of CUDA wheels)
is never built here: its test runs only where it is built already and is marked slow.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from anpred.errors import UsageError
from anpred.library import get_library
from anpred.library.environments import RECORD_FILE, release_env, versions_root
from anpred.library.versions import (
    NUMPY1,
    RECIPES,
    ensure_version_env,
    env_name,
    version_library,
)
from anpred.participants import parse_participant, parse_participants
from anpred.pipeline.identical import (
    Comparison,
    mark_releases,
    release_groups,
    stage_operators,
)
from anpred.report.identical import identical_notes
from anpred.store import RunStore
from anpred.store.summary_records import BY_KEY, DIFFERS_KEY, KEY

HERE = Path(__file__).resolve().parent
OLD_ORT = "1.17.3"


def _tiny_cnn(path: Path) -> Path:
    source = HERE.parent / "pipeline" / "tiny_model.py"
    spec = importlib.util.spec_from_file_location("tiny_model", source)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.tiny_cnn(path)


def _anpred(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anpred", *args],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=900,
    )


# --- parsing, the descriptor, bad input (nothing built) ------------------------------------


@pytest.mark.parametrize(
    ("spec", "library", "config", "version"),
    [
        ("onnxruntime@1.17.3", "onnxruntime", "", "1.17.3"),
        ("openvino@2024.4.0[bf16]", "openvino", "bf16", "2024.4.0"),
        ("ncnn@1.0.20230223", "ncnn", "", "1.0.20230223"),
        ("jax@0.10.1[nojit]", "jax", "nojit", "0.10.1"),
        ("torch@2.0.1", "torch", "", "2.0.1"),
    ],
)
def test_a_release_spec_keeps_its_version_in_the_name(spec, library, config, version) -> None:
    p = parse_participant(spec)
    assert (p.name, p.library, p.config, p.version) == (spec, library, config, version)
    assert p.settings == dict(get_library(library).configurations[config])
    assert p.to_dict()["version"] == version
    assert "version" not in parse_participant(library).to_dict()  # unchanged for the others


def test_the_release_descriptor_is_the_library_in_its_own_environment() -> None:
    base = get_library("openvino")
    release = version_library("openvino", "2024.4.0")
    assert release.name == "openvino@2024.4.0"
    assert release.participant_name("bf16") == "openvino@2024.4.0[bf16]"
    assert (release.runner, release.loads) == (base.runner, base.loads)
    assert dict(release.configurations) == dict(base.configurations)
    assert release.precision("bf16") == base.precision("bf16")
    assert release.environment == "@" + env_name("openvino", "2024.4.0")
    assert not release.in_all
    assert env_name("openvino", "2024.4.0") != env_name("openvino", "2024.5.0")


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("nosuchlib@1.0", "unknown library 'nosuchlib'"),
        ("mnn@3.0.0", "releases of mnn cannot be participants"),
        ("onnxruntime@", "give the release after '@'"),
        ("onnxruntime@1.17;rm", "'1.17;rm' is not a release version"),
        ("onnxruntime@1.17.3[O9]", "unknown configuration 'onnxruntime@1.17.3[O9]'"),
    ],
)
def test_a_bad_release_spec_is_one_line(spec: str, says: str) -> None:
    with pytest.raises(UsageError, match=None) as err:
        parse_participant(spec)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_the_cli_names_an_unknown_library_in_one_line(tmp_path: Path) -> None:
    model = _tiny_cnn(tmp_path / "tiny.onnx")
    proc = _anpred("run", str(model), "--libs", "onnxruntime,nosuchlib@1.0", "--out",
                   str(tmp_path / "run"))  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "unknown library 'nosuchlib'" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_a_release_the_index_lacks_is_one_line_and_leaves_nothing(tmp_path: Path) -> None:
    """pip asks the index (``pip install onnxruntime==0.0.1``: ~5 s) and fails; the one
    line names the release and what the index has; the half-built venv is removed.
    """
    model = _tiny_cnn(tmp_path / "tiny.onnx")
    cache = tmp_path / "versions"
    proc = _anpred("run", str(model), "--libs", "onnxruntime@0.0.1", "--out",
                   str(tmp_path / "run"), ANPRED_VERSIONS_CACHE=str(cache))  # fmt: skip
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    if "has no onnxruntime 0.0.1" not in line or "is it reachable?" in line:
        pytest.skip(f"the package index did not answer: {line}")
    assert line.startswith("anpred: error: onnxruntime@0.0.1: the package index has no onnxrunt")
    assert "(it has 1." in line  # what the index does have, first ... last
    assert not (cache / env_name("onnxruntime", "0.0.1")).exists()
    assert (cache / f"{env_name('onnxruntime', '0.0.1')}.log").is_file()


# --- the release environment and the worker's Python ---------------------------------------


def test_a_built_release_environment_gives_the_worker_its_python(tmp_path, monkeypatch) -> None:
    """A release environment (faked here: this Python) is found by its record and ready
    mark; the participant's worker runs its Python, this clone's anpred on PYTHONPATH, pip
    offline. Without the ready mark it is not built.
    """
    from anpred.execution.pool import participant_python

    monkeypatch.setenv("ANPRED_VERSIONS_CACHE", str(tmp_path))
    folder = tmp_path / env_name("onnxruntime", "1.16.3")
    folder.mkdir()
    site = [p for p in sys.path if p.endswith("site-packages")]  # where onnxruntime is
    record = {"python": sys.executable, "site": site, "library": "onnxruntime"}
    (folder / RECORD_FILE).write_text(json.dumps(record))
    assert release_env(folder.name) is None  # no ready mark yet
    p = parse_participant("onnxruntime@1.16.3[O0]")
    assert not p.descriptor().available()
    (folder / ".ready").touch()
    assert p.descriptor().available()
    assert ensure_version_env("onnxruntime", "1.16.3").python == Path(sys.executable)
    python, env = participant_python(p)
    assert python == sys.executable
    import anpred

    assert env["PYTHONPATH"].split(os.pathsep)[0] == str(Path(anpred.__file__).parents[1])
    assert env["PIP_NO_INDEX"] == "1"
    assert participant_python(parse_participant("onnxruntime"))[0] == ""  # the main env's


def test_a_release_keeps_its_version_when_faulted_and_doctor_lists_it(
    tmp_path, monkeypatch
) -> None:
    """A fault on a release runs in that release (``anpred inject --lib onnxruntime@1.17.3``:
    measured, the drill-down names the faulted Conv); ``anpred doctor`` lists built releases.
    """
    from anpred.cli.doctor_command import checkup, render
    from anpred.inject.participants import faulty_participant
    from anpred.inject.spec import FaultSpec

    spec = FaultSpec.from_dict({"stage": "s2", "op": "Conv", "kind": "bf16", "severity": 1.0})
    faulty = faulty_participant(parse_participant("onnxruntime@1.16.3"), spec)
    assert faulty.name.startswith("onnxruntime@1.16.3!") and faulty.version == "1.16.3"
    monkeypatch.setenv("ANPRED_VERSIONS_CACHE", str(tmp_path))
    assert "none (each is built on first use)" in render(checkup(tmp_path))
    folder = tmp_path / env_name("onnxruntime", "1.16.3")
    folder.mkdir()
    record = {"python": sys.executable, "library": "onnxruntime", "version": "1.16.3",
              "bytes": 3 * 10**8}  # fmt: skip
    (folder / RECORD_FILE).write_text(json.dumps(record))
    (folder / ".ready").touch()
    found = checkup(tmp_path)
    assert [r["participant"] for r in found.releases] == ["onnxruntime@1.16.3"]
    assert "onnxruntime@1.16.3" in render(found)


def test_pip_failures_are_said_in_one_line() -> None:
    """pip's own words, shortened: a missing release, a conflict (tensorflow-cpu 2.18.0 pins
    protobuf<6, onnx 1.23.2 needs >=6.31.1: measured; the build then tries the onnx of the
    release's time), an index that lists nothing.
    """
    from anpred.library.versions import _ONNX_CONFLICT, _pip_reason

    missing = ("ERROR: Could not find a version that satisfies the requirement "
               "onnxruntime==0.0.1 (from versions: 1.15.0, 1.16.0, 1.32.0)")  # fmt: skip
    assert _pip_reason("onnxruntime", "0.0.1", missing) == (
        "the package index has no onnxruntime 0.0.1 (it has 1.15.0 ... 1.32.0)"
    )
    nothing = missing.replace("1.15.0, 1.16.0, 1.32.0", "none")
    assert "is it reachable?" in _pip_reason("onnxruntime", "0.0.1", nothing)
    conflict = ("ERROR: Cannot install onnx==1.23.2 and tensorflow-cpu==2.18.0 because these "
                "package versions have conflicting dependencies.\nERROR: ResolutionImpossible")
    assert _pip_reason("tensorflow", "2.18.0", conflict) == (
        "Cannot install onnx==1.23.2 and tensorflow-cpu==2.18.0 because these package "
        "versions have conflicting dependencies"
    )
    assert _ONNX_CONFLICT.search(conflict)
    assert not _ONNX_CONFLICT.search(conflict.replace("onnx==1.23.2", "numpy==2.4.6"))


def test_every_recipe_installs_wheels_of_the_release() -> None:
    for library, recipe in RECIPES.items():
        assert "{version}" in recipe.requirements[0], library
        get_library(library)  # a registered library
    assert NUMPY1 == "numpy<2"


# --- the bit-identical note ----------------------------------------------------------------


def test_releases_compared_bit_for_bit_are_recorded_and_said() -> None:
    records = [
        {"participant": "torch", "library": "torch", "status": "ok"},
        {"participant": "onnxruntime", "library": "onnxruntime", "status": "ok"},
        {"participant": "onnxruntime@1.17.3", "library": "onnxruntime", "status": "ok"},
        {"participant": "onnxruntime@1.20.1", "library": "onnxruntime", "status": "ok"},
        {"participant": "onnxruntime@1.16.3", "library": "onnxruntime", "status": "crash"},
        {"participant": "onnxruntime[O0]", "library": "onnxruntime", "status": "ok"},
        {"participant": "onnxruntime[O1]", "library": "onnxruntime", "status": "ok"},
    ]
    # only finished participants, in groups with a release, by library and configuration
    group = ["onnxruntime", "onnxruntime@1.17.3", "onnxruntime@1.20.1"]
    assert release_groups(records) == [group]
    found = [
        Comparison(("onnxruntime", "onnxruntime@1.17.3"), None),
        Comparison(("onnxruntime", "onnxruntime@1.20.1"), "layer2", 2, 3e-6),
        Comparison(("onnxruntime@1.17.3", "onnxruntime@1.20.1"), "stem", 0, 1e-6),
    ]
    mark_releases(records, found, "captures")
    assert records[1][KEY] == ["onnxruntime@1.17.3"] and records[2][KEY] == ["onnxruntime"]
    assert records[1][BY_KEY] == "captures" and KEY not in records[0]
    assert records[3][DIFFERS_KEY]["onnxruntime"] == {
        "anchor": "layer2", "index": 2, "max_abs_diff": 3e-6
    }
    same, later, first = identical_notes(records)
    assert same.startswith("onnxruntime and onnxruntime@1.17.3 gave bit-identical anchors")
    assert later.startswith(
        "onnxruntime and onnxruntime@1.20.1: anchors bit-identical before layer2, first "
        "different at layer2, max |Δ| 3e-06"
    )
    assert first == "onnxruntime@1.17.3 and onnxruntime@1.20.1 differ from the first anchor " \
        "on (stem, max |Δ| 1e-06)"
    assert identical_notes(None) == [] and identical_notes([{"participant": "x"}]) == []
    one_op = {"anchor": "pool", "index": 5, "max_abs_diff": 4.8e-7,
              "stage_ops": {"GlobalAveragePool": 1}, "operator": "/avgpool/GlobalAveragePool"}
    (note,) = identical_notes([{"participant": "jax@0.10.1", DIFFERS_KEY: {"jax": one_op},
                                BY_KEY: "captures"}])  # fmt: skip
    assert note == (
        "jax@0.10.1 and jax: anchors bit-identical before pool, first different at pool "
        "(GlobalAveragePool×1), max |Δ| 4.8e-07: the operator whose numerics changed between "
        "them is /avgpool/GlobalAveragePool"
    )


def test_the_first_anchor_two_captures_differ_at() -> None:
    from anpred.pipeline.identical import _first_difference

    a = {"stem": np.zeros(3, np.float32), "layer1": np.ones(3, np.float32)}
    b = {"stem": np.zeros(3, np.float32), "layer1": np.array([1, 1, 1.5], np.float32)}
    assert _first_difference(a, b, ["stem", "layer1"]) == (1, 0.5)
    assert _first_difference(a, dict(a), ["stem", "layer1"]) == (2, 0.0)
    negative_zero = {**a, "stem": -np.zeros(3, np.float32)}  # equal as numbers, not as bits
    assert _first_difference(a, negative_zero, ["stem", "layer1"]) == (0, 0.0)
    assert _first_difference(a, None, ["stem"])[0] == 0


def test_an_older_onnx_loader_gets_the_ir_version_it_names(tmp_path: Path) -> None:
    from anpred.interchange.ir_version import lowered_ir

    model = _tiny_cnn(tmp_path / "tiny.onnx")
    refusal = "Unsupported model IR version: 14, max supported IR version: 9"
    lowered = lowered_ir(str(model), refusal)
    assert lowered is not None
    proto = onnx.load_from_string(lowered)
    assert proto.ir_version == 9
    assert proto.graph == onnx.load(str(model)).graph
    assert lowered_ir(str(model), "some other failure") is None
    assert lowered_ir(str(model), refusal.replace(": 9", ": 3")) is None  # below opset 17's


# --- an old and the current onnxruntime on the tiny model ----------------------------------


@pytest.fixture(scope="module")
def old_onnxruntime() -> None:
    """onnxruntime 1.17.3's environment in the shared cache: built once (44 s), skipped with
    the reason when the package index cannot be reached.
    """
    try:
        ensure_version_env("onnxruntime", OLD_ORT)
    except UsageError as err:
        pytest.skip(f"onnxruntime@{OLD_ORT} cannot be built here: {err}")


def test_an_old_and_the_current_onnxruntime_run_side_by_side(old_onnxruntime, tmp_path) -> None:
    model = _tiny_cnn(tmp_path / "tiny.onnx")
    out = tmp_path / "run"
    libs = f"onnxruntime,onnxruntime@{OLD_ORT}"
    proc = _anpred("run", str(model), "--libs", libs, "--images", "2", "--keep-captures", "all",
                   "--out", str(out))  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    by_name = {p["participant"]: p for p in summary["participants"]}
    old, new = by_name[f"onnxruntime@{OLD_ORT}"], by_name["onnxruntime"]
    assert old["status"] == new["status"] == "ok", old
    # the release ran in its own environment: the worker's onnxruntime says so
    assert old["version"] == OLD_ORT and old["library"] == "onnxruntime"
    assert new["version"] == importlib.metadata.version("onnxruntime") != OLD_ORT
    assert f"onnxruntime@{OLD_ORT}" in proc.stdout  # the terminal table names it
    # the record says bit-identical exactly when every kept capture is
    store = RunStore(out)
    same = True
    for input_id in store.read_input_ids():
        a = store.participant("onnxruntime").load_capture(input_id)
        b = store.participant(f"onnxruntime@{OLD_ORT}").load_capture(input_id)
        same &= set(a) == set(b) and all(a[k].tobytes() == b[k].tobytes() for k in a)
    assert (old.get(KEY) == ["onnxruntime"]) is same
    assert (new.get(KEY) == [f"onnxruntime@{OLD_ORT}"]) is same
    assert ("gave bit-identical anchors" in proc.stdout) is same
    # what the stage where two releases first differ holds (tiny CNN: s2 = Conv + Sigmoid)
    held = stage_operators(store.read_export(), ["s2", "nosuchstage"])
    assert held == {"s2": {"stage_ops": {"Conv": 1, "Sigmoid": 1}, "operator": None}}
    if not same:  # where they first differ is recorded and said instead
        assert old[DIFFERS_KEY]["onnxruntime"]["anchor"] in [a["key"] for a in summary["anchors"]]
        assert "first different at" in proc.stdout or "differ from the first" in proc.stdout
    html = (out / "report.html").read_text()
    assert f"onnxruntime@{OLD_ORT}" in html
    assert ("gave bit-identical anchors" in html) is same


def test_libs_says_how_to_ask_for_a_release() -> None:
    proc = _anpred("libs")
    assert proc.returncode == 0, proc.stderr
    assert "LIB@VERSION" in proc.stdout


def test_parse_participants_builds_nothing_for_a_built_release(old_onnxruntime, capsys) -> None:
    (p,) = parse_participants(f"onnxruntime@{OLD_ORT}")
    assert p.version == OLD_ORT
    assert "building" not in capsys.readouterr().err  # built once, offline from then on
    folder = versions_root() / env_name("onnxruntime", OLD_ORT)
    record = json.loads((folder / RECORD_FILE).read_text())
    assert record["installed"]["onnxruntime"] == OLD_ORT
    assert record["bytes"] > 0 and record["build_seconds"] > 0


# --- openvino, jax, ncnn, torch releases: only where built already (torch: 4.4 GB) ----------

#: Release → its library's current participant it runs beside. Measured here: each gave
#: bit-identical anchors to the current release on this model but jax (0.10.1 vs 0.10.2).
RELEASES = [
    ("openvino", "2024.4.0"),
    ("jax", "0.10.1"),
    ("ncnn", "1.0.20230223"),
    ("torch", "2.0.1"),
]


@pytest.mark.slow
@pytest.mark.parametrize(("library", "version"), RELEASES)
def test_a_built_release_runs_the_tiny_model(library: str, version: str, tmp_path) -> None:
    if release_env(env_name(library, version)) is None:
        pytest.skip(f"{library}@{version} is not built: python -c \"from anpred.library."
                    f"versions import ensure_version_env as e; e('{library}', '{version}')\"")
    model = _tiny_cnn(tmp_path / "tiny.onnx")
    out = tmp_path / "run"
    spec = f"{library}@{version}"
    libs = ",".join(dict.fromkeys(["onnxruntime", library, spec]))
    proc = _anpred("run", str(model), "--libs", libs, "--images", "1", "--out", str(out))
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    by_name = {p["participant"]: p for p in summary["participants"]}
    record = by_name[spec]
    assert record["status"] == "ok" and record["version"].startswith(version), record
    assert record["library"] == library
    assert not by_name[library]["version"].startswith(version)  # the current one, beside it
