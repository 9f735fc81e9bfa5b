"""Drive one deployment runner's hooks in its own environment (a script, and its caller).

``python drive_converted.py SPEC MODEL FEEDS OUT SETTINGS`` runs, in the runtime's Python:
the conversion through anpred's cached conversion step (onnxslim first when the runner
says so), ``load_impl`` and ``run_impl`` on every feed in ``FEEDS`` (an ``.npz`` of NCHW
arrays, ``x0``, ``x1``, ...); it writes the raw outputs to ``OUT`` (``.npz``, ``f{i}_{j}``
for feed i, output j) and ``OUT + ".json"`` (timings, artifact, output names and shapes).
Only numpy, onnx and anpred are imported here; the runner imports its runtime. Unlike
``deploy_hooks.py`` it goes through the framework's conversion step
(:func:`anpred.backends.conversion.convert_cached`), so onnxslim runs first for runners with
``needs_slim`` and conversions are cached under ``$ANPRED_CACHE`` as in a run.

:func:`drive` runs the script with a runtime environment's Python from a test (in the test
process nothing of the runtime is imported). Tests skip when the environment is not built.
"""

from __future__ import annotations

import functools
import importlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np


def _main(spec: str, model_path: str, feeds_path: str, out: str, settings_json: str) -> None:
    import onnx

    from anpred.backends.conversion import convert_cached
    from anpred.backends.converted import ConversionSource

    module, _, name = spec.partition(":")
    runner = getattr(importlib.import_module(module), name)(json.loads(settings_json))
    settings = dict(runner.settings)
    model = onnx.load(model_path)
    make = functools.partial(ConversionSource, kind="anchored", zoo_model=None, settings=settings)
    start = time.perf_counter()
    converted = convert_cached(
        model,
        runner.library,
        runner.conversion_settings(),
        runner.converter_version(),
        runner.needs_slim,
        make,
        runner.convert_impl,
    )
    convert_s = time.perf_counter() - start
    start = time.perf_counter()
    artifact = runner.select_artifact(converted.artifact)
    handle = runner.load_impl(artifact, converted.source)
    load_s = time.perf_counter() - start
    feeds = np.load(feeds_path)
    arrays: dict[str, np.ndarray] = {}
    run_s = []
    for i, key in enumerate(sorted(feeds.files, key=lambda k: int(k[1:]))):
        start = time.perf_counter()
        raw = runner.run_impl(handle, [feeds[key]])
        run_s.append(round(time.perf_counter() - start, 3))
        arrays.update({f"f{i}_{j}": np.asarray(r) for j, r in enumerate(raw)})
    np.savez(out, **arrays)
    names = runner.artifact_output_names(handle)
    info: dict[str, Any] = {
        "convert_s": round(convert_s, 3),
        "record": converted.record,
        "load_s": round(load_s, 3),
        "run_s": run_s,
        "artifact": str(artifact),
        "artifact_output_names": list(names) if names is not None else None,
        "source_output_names": list(converted.source.output_names),
        "source_output_shapes": [list(s) for s in converted.source.output_shapes],
        "raw_shapes": [list(arrays[f"f0_{j}"].shape) for j in range(len(raw))],
    }
    Path(out + ".json").write_text(json.dumps(info, indent=1))


def drive(
    python: Path,
    spec: str,
    model: Path,
    feeds: Sequence[np.ndarray],
    out: Path,
    settings: dict[str, Any] | None = None,
    *,
    env: dict[str, str] | None = None,
    prefix: Sequence[str] = (),
    timeout: float = 900,
) -> tuple[list[list[np.ndarray]], dict[str, Any]]:
    """Run the script with ``python`` (prefixed by ``prefix``, e.g. ``unshare -rn``).

    Returns:
        The raw outputs per feed, and the script's info (timings, shapes, names).

    Raises:
        AssertionError: The script failed (its output in the message).
    """
    out.parent.mkdir(parents=True, exist_ok=True)
    feeds_path = out.with_suffix(".feeds.npz")
    np.savez(feeds_path, **{f"x{i}": f for i, f in enumerate(feeds)})
    src = str(Path(__file__).resolve().parents[3] / "src")
    full_env = {**os.environ, **(env or {}), "PYTHONPATH": src}
    command = [
        *prefix,
        str(python),
        str(Path(__file__).resolve()),
        spec,
        str(model),
        str(feeds_path),
        str(out),
        json.dumps(settings or {}),
    ]
    done = subprocess.run(
        command, env=full_env, capture_output=True, text=True, timeout=timeout, check=False
    )
    assert done.returncode == 0, f"driver failed ({done.returncode}):\n{done.stderr[-4000:]}"
    info = json.loads(Path(str(out) + ".json").read_text())
    info["stderr"] = done.stderr
    data = np.load(str(out) if str(out).endswith(".npz") else str(out) + ".npz")
    outputs = [
        [data[f"f{i}_{j}"] for j in range(len(info["raw_shapes"]))] for i in range(len(feeds))
    ]
    return outputs, info


def graph_layout(raw: np.ndarray, shape: Sequence[int]) -> np.ndarray:
    """``raw`` in the graph's layout: as is when it has ``shape``, else channels-last
    transposed back (NHWC → NCHW).
    """
    shape = tuple(shape)
    if raw.shape == shape:
        return raw
    back = (0, raw.ndim - 1, *range(1, raw.ndim - 1))
    moved = raw.transpose(back)
    assert moved.shape == shape, f"{raw.shape} is neither {shape} nor its channels-last form"
    return moved


if __name__ == "__main__":
    _main(*sys.argv[1:6])
