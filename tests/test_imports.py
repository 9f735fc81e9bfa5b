"""Importing anpred (every module outside backends/translators) imports no DL library."""

from __future__ import annotations

import pkgutil
import subprocess
import sys

import anpred

DL = ("torch", "tensorflow", "jax", "paddle", "onnxruntime", "openvino")
WORKER_ONLY = (
    "anpred.backends.",
    "anpred.translate.torch",
    "anpred.translate.tensorflow",
    "anpred.translate.jax",
    "anpred.translate.paddle",
    "anpred.zoo.describe",
)


def _modules() -> list[str]:
    names = [m.name for m in pkgutil.walk_packages(anpred.__path__, "anpred.")]
    return [n for n in names if not n.startswith(WORKER_ONLY) and n != "anpred.__main__"]


def test_import_anpred_imports_no_dl_library() -> None:
    code = (f"import anpred, sys; bad=[m for m in {DL!r} if m in sys.modules]; assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_every_analysis_module_imports_without_dl_libraries() -> None:
    # Hide the DL libraries entirely: importing them must fail, so any import is caught.
    code = (
        "import sys\n"
        f"for m in {DL!r}: sys.modules[m] = None\n"
        "import importlib\n"
        f"for name in {_modules()!r}: importlib.import_module(name)\n"
        "from anpred.cli.main import main\n"
        "try:\n    main(['--help'])\nexcept SystemExit as e:\n    assert e.code == 0\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "usage: anpred" in proc.stdout
