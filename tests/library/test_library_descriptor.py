"""Library descriptors: registration, lookup, the views on them, and plugins from outside.

In-process tests register into a copy of the registry (``fresh_registry``); plugin loading
is tested in ``anpred libs`` subprocesses, where it really happens (first registry use).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from anpred.backends.base import Runner
from anpred.backends.registry import register_runner, runner_class
from anpred.errors import UsageError
from anpred.library import Library, Loads, get_library, libraries, register_library
from anpred.library import descriptor as registry
from anpred.participants import (
    CONFIGURATIONS,
    DEFAULT_LIBRARIES,
    LIBRARIES,
    parse_participant,
    parse_participants,
)

BUILTIN = ("torch", "onnxruntime", "openvino", "tensorflow", "jax", "paddle")
DL = ("torch", "tensorflow", "jax", "paddle", "onnxruntime", "openvino")


class FakeRunner(Runner):
    """Never run: only its import path matters here."""

    library = "fake"

    def activate_impl(self, job):  # type: ignore[no-untyped-def]
        raise NotImplementedError

    infer_impl = infer_plain_impl = isolate_impl = version = activate_impl  # type: ignore[assignment]


def fake(name: str = "fake", **fields: object) -> Library:
    values: dict = {
        "name": name,
        "distributions": ("onnx",),
        "extra": "",
        "requirement": "anpred-fake",
        "import_name": "onnx",
        "runner": f"{__name__}:FakeRunner",
        "loads": Loads.CONVERTED_ARTIFACT,
        "configurations": {"": {}, "fp16": {"precision": "fp16", "env": {"X": "1"}}},
    }
    return Library(**{**values, **fields})


@pytest.fixture
def fresh_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    libraries()  # builtins and plugins loaded into the real registry first
    monkeypatch.setattr(registry, "_REGISTRY", dict(registry._REGISTRY))
    monkeypatch.setattr(registry, "_ORIGIN", dict(registry._ORIGIN))


def test_builtins_in_display_order_with_their_facts() -> None:
    assert tuple(lib.name for lib in libraries())[:6] == BUILTIN
    assert tuple(DEFAULT_LIBRARIES) == BUILTIN
    assert LIBRARIES["paddle"] == ("paddle", "paddle")
    assert get_library("tensorflow").distributions[0] == "tensorflow-cpu"
    assert not get_library("tensorflow").shares_process and not get_library("paddle").shares_process
    assert get_library("jax").shares_process
    assert get_library("torch").loads is Loads.NATIVE_MODULE
    assert get_library("openvino").loads is Loads.ONNX_FILE
    assert get_library("jax").loads is Loads.TRANSLATED_ONNX
    assert (
        get_library("onnxruntime").runner == "anpred.backends.onnxruntime_runner:OnnxRuntimeRunner"
    )


def test_unknown_library_is_one_line_with_the_choices() -> None:
    for call in (lambda: get_library("mxnet"), lambda: parse_participant("mxnet[fp16]")):
        with pytest.raises(UsageError) as err:
            call()
        message = str(err.value)
        assert message.startswith("unknown library 'mxnet'; choose from torch, onnxruntime")
        assert "\n" not in message
    with pytest.raises(KeyError):
        CONFIGURATIONS["mxnet"]


def test_duplicate_registration_is_an_error_and_keeps_the_first() -> None:
    before = get_library("torch")
    with pytest.raises(UsageError, match=r"'torch' is registered twice: by anpred \(builtin\)"):
        register_library(fake("torch"))
    assert get_library("torch") is before


@pytest.mark.parametrize(
    ("fields", "match"),
    [
        ({"name": "Fake[x]"}, "name must match"),
        ({"runner": "fake_runner.FakeRunner"}, "module:ClassName"),
        ({"configurations": {"fp16": {}}}, "default configuration ''"),
        ({"configurations": {"": {}, "a,b": {}}}, "configuration names"),
        ({"extra": "", "requirement": ""}, "pip extra or the requirement"),
        ({"distributions": "onnx"}, "distributions"),
    ],
)
def test_bad_descriptor_is_refused(fields: dict, match: str) -> None:
    with pytest.raises(UsageError, match=match):
        fake(**fields)


@pytest.mark.usefixtures("fresh_registry")
def test_a_registered_library_is_a_participant_everywhere() -> None:
    register_library(fake())
    register_library(fake("fake-missing", import_name="anpred_no_such_module", in_all=False))
    assert "fake" in LIBRARIES and CONFIGURATIONS["fake"]["fp16"]["precision"] == "fp16"
    p = parse_participant("fake[fp16]")
    assert (p.name, p.library, p.config) == ("fake[fp16]", "fake", "fp16")
    assert p.environment() == {"X": "1"}
    p.settings["env"]["X"] = "2"  # a participant's settings are its own copy
    assert CONFIGURATIONS["fake"]["fp16"]["env"] == {"X": "1"}
    assert "fake" in DEFAULT_LIBRARIES and "fake-missing" not in DEFAULT_LIBRARIES
    assert "fake" in [p.name for p in parse_participants("all")]
    with pytest.raises(
        UsageError, match=r"not installed; install it with: pip install 'anpred-fake'"
    ):
        parse_participants("torch,fake-missing")
    with pytest.raises(
        UsageError, match=r"unknown configuration 'fake\[bf16\]'; fake has fake\[fp16\]"
    ):
        parse_participant("fake[bf16]")
    assert runner_class("fake") is FakeRunner


@pytest.mark.usefixtures("fresh_registry")
def test_runner_must_be_a_runner_and_agree_with_register_runner() -> None:
    register_library(fake("notrunner", runner="anpred.library.descriptor:Library"))
    with pytest.raises(UsageError, match="not a Runner subclass"):
        runner_class("notrunner")
    register_library(fake())
    assert register_runner("fake")(FakeRunner) is FakeRunner
    with pytest.raises(UsageError, match="its descriptor names"):
        register_runner("fake")(type("Other", (FakeRunner,), {}))


def test_using_the_registry_imports_no_dl_library() -> None:
    code = (
        "import sys\n"
        "from anpred.library import libraries\n"
        "from anpred.participants import parse_participants\n"
        "facts = [(lib.available(), lib.version()) for lib in libraries()]\n"
        "parse_participants('all')\n"
        f"bad = [m for m in {DL!r} if m in sys.modules]\n"
        "assert not bad, bad\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]


def _libs(tmp_path: Path, plugins: str) -> subprocess.CompletedProcess[str]:
    path = os.pathsep.join(p for p in (str(tmp_path), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "ANPRED_PLUGINS": plugins, "PYTHONPATH": path}
    return subprocess.run(
        [sys.executable, "-m", "anpred", "libs", "--json"], capture_output=True, text=True, env=env
    )


PLUGIN = """
from anpred.library import Library, Loads, register_library

def make(name):
    return Library(name=name, distributions=("onnx",), extra="", requirement="x",
        import_name="onnx", runner="x:Runner", loads=Loads.CONVERTED_ARTIFACT)

def register(name={name!r}):
    register_library(make(name))

LIBRARY = make({name!r} + "-object")  # registered only when an entry point names it

if {at_import!r}:
    register()
"""


def _plugin(folder: Path, module: str, name: str, at_import: bool = True) -> None:
    (folder / f"{module}.py").write_text(PLUGIN.format(name=name, at_import=at_import))


def test_plugins_from_the_environment_and_entry_points(tmp_path: Path) -> None:
    _plugin(tmp_path, "plugin_a", "rt-a")
    _plugin(tmp_path, "plugin_b", "rt-b", at_import=False)
    _plugin(tmp_path, "plugin_c", "rt-c")
    dist = tmp_path / "anpred_fake-0.1.dist-info"  # an installed distribution's metadata
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: anpred-fake\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[anpred.libraries]\nb = plugin_b:register\nc = plugin_c\nd = plugin_c:LIBRARY\n"
    )
    proc = _libs(tmp_path, "plugin_a")
    assert proc.returncode == 0, proc.stderr[-2000:]
    names = [entry["library"] for entry in json.loads(proc.stdout)]
    from anpred.library.runtimes import RUNTIME_LIBRARIES

    ours = len(BUILTIN) + len(RUNTIME_LIBRARIES)  # builtins, then the deployment runtimes
    assert names[:6] == list(BUILTIN)
    assert names[6:ours] == [lib.name for lib in RUNTIME_LIBRARIES]
    assert names[ours] == "rt-a"  # ANPRED_PLUGINS first, then the entry points
    assert set(names[ours + 1 :]) == {"rt-b", "rt-c", "rt-c-object"}  # function, module, Library
    loads = {e["library"]: e["loads"] for e in json.loads(proc.stdout)}
    assert loads["rt-c"] == "converted-artifact"


def test_a_plugin_registering_a_taken_name_is_one_line(tmp_path: Path) -> None:
    _plugin(tmp_path, "plugin_dup", "onnxruntime")
    proc = _libs(tmp_path, "plugin_dup")
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "'onnxruntime' is registered twice: by anpred (builtin) and by ANPRED_PLUGINS" in line


def test_a_plugin_that_does_not_import_is_one_line(tmp_path: Path) -> None:
    _plugin(tmp_path, "plugin_a", "rt-a")
    proc = _libs(tmp_path, "plugin_a, anpred_no_such_plugin")
    assert proc.returncode == 2
    line = proc.stderr.strip()
    assert "\n" not in line and "Traceback" not in line
    assert "plugin ANPRED_PLUGINS module 'anpred_no_such_plugin'" in line
    assert "ModuleNotFoundError" in line
