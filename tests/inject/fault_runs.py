"""Run the fault chain in one library's subprocess (``fault_check.py``) and read its captures.

Shared by the tests of whole-tensor faults (``test_fault_kinds.py``) and partial faults
(``test_partial_faults.py``). The test process imports no DL library: each library runs in
its own subprocess (TensorFlow and paddle never share one).
"""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fault_chain import build_export

HERE = Path(__file__).parent
#: Libraries whose subprocess is quick (seconds); the others compile or import for longer.
FAST = {"torch", "onnxruntime"}
LIBRARIES = ["torch", "onnxruntime", "openvino", "jax", "tensorflow", "paddle"]


def library_params() -> list[Any]:
    """pytest params of :data:`LIBRARIES`, the slow ones marked slow."""
    return [lib if lib in FAST else pytest.param(lib, marks=pytest.mark.slow) for lib in LIBRARIES]


class LibraryRun:
    """The captures one library's subprocess wrote, in ONNX's layout."""

    def __init__(self, folder: Path) -> None:
        self.results = json.loads((folder / "results.json").read_text())
        self.folder = folder

    def arrays(self, name: str) -> dict[str, np.ndarray]:
        layouts = self.results[name]["layouts"]
        with np.load(self.folder / f"{name}.npz") as data:
            out = {}
            for key in data.files:
                layout = layouts.get(key.removeprefix("infer/"))
                value = data[key]
                out[key] = value.transpose(0, 3, 1, 2) if layout == "NHWC" else value
            return out


def run_library(library: str, cases: Mapping[str, Mapping[str, Any]], folder: Path) -> LibraryRun:
    """Run the clean chain, every fault of ``cases`` (name → fault dict), and the clean chain
    again, in ``library``'s subprocess; skip when the library is not installed.
    """
    if importlib.util.find_spec(library) is None:  # never imported here
        pytest.skip(f"{library} is not installed")
    export = build_export(folder / "export")
    cases_path = folder / "cases.json"
    cases_path.write_text(json.dumps([{"name": n, "fault": dict(f)} for n, f in cases.items()]))
    out = folder / "out"
    out.mkdir()
    env = {
        **os.environ,
        "JAX_PLATFORMS": "cpu",
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "GLOG_minloglevel": "2",
        "PYTHONWARNINGS": "ignore",
    }
    proc = subprocess.run(
        [
            sys.executable,
            str(HERE / "fault_check.py"),
            library,
            str(export.folder),
            str(cases_path),
            str(out),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return LibraryRun(out)
