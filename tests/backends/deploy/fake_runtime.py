"""A fake deployment runtime for the ConvertedRunner framework's tests (no runtime needed).

Its "converter" copies the ONNX file; its "runtime" is onnxruntime, whose outputs it hands
back the way real runtimes do: channels-last (onnx2tf), without the batch dimension (ncnn)
or in reverse order. Other configurations make the converter fail, fail only for the
isolation model, or reach for the network and pip (the offline guard must refuse both).

Loaded with ``ANPRED_PLUGINS=fake_runtime`` and this folder on ``PYTHONPATH``; its
environment is ``$FAKE_RUNTIME_ENV`` (``""``: the main environment). Each conversion is
logged, one line, to ``$FAKE_RUNTIME_LOG`` when set (the cache tests count them).
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anpred.backends.converted import ConversionError, ConversionSource, ConvertedRunner
from anpred.library import Library, Loads, register_library

#: The converter's failure, two lines: the participant's message keeps the first only.
FAILURE = "fake converter: op Conv is not supported\n  at node /block1/conv/Conv"

register_library(
    Library(
        name="fake",
        distributions=("onnxruntime",),
        extra="",
        requirement="fake",
        import_name="onnxruntime",
        runner="fake_runtime:FakeRuntimeRunner",
        loads=Loads.CONVERTED_ARTIFACT,
        configurations={
            "": {"mode": "nhwc"},
            "nobatch": {"mode": "nobatch"},
            "reorder": {"mode": "reorder"},
            "fail": {"mode": "fail"},
            "noisolation": {"mode": "noisolation"},
            "network": {"mode": "network"},
        },
        environment=os.environ.get("FAKE_RUNTIME_ENV", ""),
        converter="copy",
        converter_distributions=("onnx",),
        in_all=False,
    )
)


class FakeRuntimeRunner(ConvertedRunner):
    """Copies the ONNX file, runs it in onnxruntime, returns outputs as runtimes do."""

    library = "fake"

    def converter_version(self) -> str:
        return "1.0"

    def convert_impl(self, source: ConversionSource, folder: Path) -> Path:
        mode = source.settings["mode"]
        log = os.environ.get("FAKE_RUNTIME_LOG")
        if log:
            with open(log, "a") as handle:
                handle.write(f"{mode} {source.kind}\n")
        if mode == "fail":
            raise ConversionError(FAILURE)
        if mode == "noisolation" and source.kind == "isolation":
            raise ConversionError("fake converter: fed anchors are not supported")
        if mode == "network":
            _reach_out(folder)
        artifact = folder / "model.fake"
        shutil.copy(source.onnx_path, artifact)
        return artifact

    def load_impl(self, artifact: Path, source: ConversionSource) -> Any:
        import onnxruntime as ort

        session = ort.InferenceSession(str(artifact), providers=["CPUExecutionProvider"])
        return session, list(source.input_names)

    def run_impl(self, handle: Any, feeds: Sequence[np.ndarray]) -> list[np.ndarray]:
        session, names = handle
        outputs = session.run(None, dict(zip(names, feeds, strict=True)))
        mode = self.settings["mode"]
        if mode == "nobatch":
            return [o[0] for o in outputs]
        if mode == "reorder":
            return outputs[::-1]
        return [np.moveaxis(o, 1, -1) if o.ndim == 4 else o for o in outputs]


def _reach_out(folder: Path) -> None:
    """What converters do here: a download, a name lookup, a ``pip install``."""
    results = []
    for attempt in (
        lambda: socket.create_connection(("93.184.215.14", 80), timeout=3),
        lambda: socket.getaddrinfo("pypi.org", 443),
        lambda: subprocess.run([sys.executable, "-m", "pip", "install", "six"], check=False),
        lambda: os.system("pip install -q six"),
    ):
        try:
            attempt()
            results.append("done")
        except OSError as err:
            results.append(type(err).__name__)
    (folder / "attempts.txt").write_text(" ".join(results))
