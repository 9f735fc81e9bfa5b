"""What the benchmark scripts share: the model workload, child processes, Markdown tables.

The workload is prepared exactly as ``anpred run`` prepares it (same functions): the
anchored export (cached under ``$ANPRED_CACHE``, built in a torch worker) and the
preprocessed inputs in the run store. Nothing here imports a DL library.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

#: The Python that runs the benchmarks also runs their child processes.
PYTHON = sys.executable
#: Bundled photographs used before seeded synthetic images fill the rest of a size (16 are
#: bundled without ultralytics and scikit-image).
PHOTOS = 8


def input_counts(n: int) -> tuple[int, int]:
    """``n`` inputs as (bundled photographs, seeded synthetic images)."""
    photos = min(n, PHOTOS)
    return photos, n - photos


def input_flags(n: int) -> list[str]:
    """``anpred run`` flags for ``n`` inputs (:func:`input_counts`)."""
    photos, synthetic = input_counts(n)
    return ["--images", str(photos), "--synthetic", str(synthetic)]


@dataclass(frozen=True)
class Workload:
    """A prepared model and its inputs.

    Attributes:
        job: The ``ModelJob`` as a dict (what a worker process activates a runner with).
        inputs: The ``.npz`` with one preprocessed array per input id.
        input_ids: Input ids in order.
        export_seconds: Time taken to export (or fetch from the cache) the anchored model.
    """

    job: dict[str, Any]
    inputs: Path
    input_ids: list[str]
    export_seconds: float


def prepare_workload(model: str, images: int, folder: Path, say: Any = print) -> Workload:
    """Export ``model`` with its default stage anchors and preprocess ``images`` inputs.

    Args:
        model: Zoo model name or path of an ``.onnx`` file.
        images: Number of inputs: bundled photographs, then seeded synthetic images
            (:func:`input_counts`, as ``anpred run`` with :func:`input_flags`).
        folder: Scratch folder, used as a run directory (receives the export and inputs).
        say: Progress printer.
    """
    from anpred.backends.base import ModelJob
    from anpred.interchange.user_module import is_onnx_path
    from anpred.pipeline.model_export import export_model
    from anpred.pipeline.run_inputs import prepare_inputs
    from anpred.settings import RunOptions
    from anpred.store import RunStore

    folder.mkdir(parents=True, exist_ok=True)
    photos, synthetic = input_counts(images)
    options = RunOptions(model=model, images=photos, synthetic=synthetic)
    if is_onnx_path(model):
        preprocessing = size = None
    else:
        from anpred.zoo.registry import get_model

        spec = get_model(model)
        preprocessing, size = spec.preprocessing, spec.input_size
    start = time.perf_counter()
    export = export_model(options, folder, say)
    seconds = time.perf_counter() - start
    ids = prepare_inputs(options, folder, export, preprocessing, size)
    zoo = None if is_onnx_path(model) else model
    job = ModelJob(export, zoo, None, 0).to_dict()
    return Workload(job, RunStore(folder).inputs_path, ids, seconds)


def run_child(
    script: Path, args: Sequence[str], env: Mapping[str, str], timeout: float = 1800
) -> tuple[dict[str, Any], float]:
    """Run ``script`` in a fresh Python process; return its last stdout JSON line and wall time.

    The wall time is taken from outside: process start, imports and exit are included.

    Raises:
        RuntimeError: The child failed or printed no JSON result.
    """
    start = time.perf_counter()
    proc = subprocess.run(
        [PYTHON, str(script), *args], capture_output=True, text=True, env=dict(env), timeout=timeout
    )
    wall = time.perf_counter() - start
    lines = [ln for ln in proc.stdout.strip().splitlines() if ln.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        raise RuntimeError(f"{script.name} {' '.join(args)} failed ({proc.returncode}):\n{tail}")
    return json.loads(lines[-1]), wall


def median_ms(seconds: Sequence[float]) -> float:
    """Median of ``seconds`` in milliseconds."""
    return statistics.median(seconds) * 1e3


def markdown_table(header: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """Render a Markdown table (numbers right-aligned)."""

    def cell(value: Any) -> str:
        return "" if value is None else str(value)

    def numeric(value: Any) -> bool:
        text = cell(value).rstrip("x×%").replace(",", "").strip()
        try:
            float(text)
        except ValueError:
            return False
        return True

    aligns = [
        "---:" if rows and all(numeric(r[i]) for r in rows) else "---" for i in range(len(header))
    ]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join(aligns) + " |"]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def machine_note() -> str:
    """One line describing where the numbers were measured."""
    import os
    import platform

    cpu = platform.processor() or platform.machine()
    info = Path("/proc/cpuinfo")
    if info.exists():
        names = [
            ln.split(":", 1)[1].strip()
            for ln in info.read_text().splitlines()
            if ln.startswith("model name")
        ]
        cpu = names[0] if names else cpu
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    return (
        f"{cpu}, {os.cpu_count()} CPUs, Python {platform.python_version()}, "
        f"{time.strftime('%Y-%m-%d %H:%M')}, load average {load} (other work on the "
        "machine slows both sides of a ratio alike only if it is steady)"
    )
