"""On-disk layout of one participant's captures inside a run directory."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import numpy as np

#: Key of the observer-effect output (final output without anchors) inside a capture file.
PLAIN_KEY = "__plain__"


def safe_name(participant: str) -> str:
    """Folder name of a participant (``torch[fp64]`` → ``torch_fp64``)."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", participant).strip("_")


def participant_dir(run_dir: Path, participant: str) -> Path:
    """Folder of a participant's captures."""
    return Path(run_dir) / "captures" / safe_name(participant)


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (write a temporary file, then rename)."""
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def write_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write arrays as an ``.npz`` atomically.

    Uncompressed on purpose: measured on yolov8n captures, zlib saved ~10 % of disk at
    0.116 s/MB against 0.0027 s/MB (benchmarks/bench_run.py) -- float activations do not
    compress.
    """
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """Read a JSON file."""
    return json.loads(Path(path).read_text())


def capture_done(folder: Path, input_id: str, kind: str = "capture") -> bool:
    """Whether a (participant, input) result of ``kind`` is complete on disk."""
    return (folder / f"{input_id}.{kind}.json").exists()


def load_capture(folder: Path, input_id: str, kind: str = "capture") -> dict[str, np.ndarray]:
    """Load one (participant, input) capture of ``kind`` (``capture`` or ``isolated``)."""
    with np.load(folder / f"{input_id}.{kind}.npz") as data:
        return {key: data[key] for key in data.files}
