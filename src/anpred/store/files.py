"""File formats of the run store: atomic JSON and ``.npz`` writes, and the capture reader.

Private to :mod:`anpred.store`: other modules reach files through
:class:`~anpred.store.layout.RunStore` and :class:`~anpred.store.layout.ParticipantStore`.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

#: Key of the observer-effect output (final output without anchors) inside a capture file.
PLAIN_KEY = "__plain__"


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (write a temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def read_json(path: Path) -> Any:
    """Read a JSON file."""
    return json.loads(Path(path).read_text())


def write_arrays(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write arrays as an ``.npz`` atomically.

    Uncompressed on purpose: measured on yolov8n captures, zlib saved ~10 % of disk at
    0.116 s/MB against 0.0027 s/MB (benchmarks/bench_run.py) -- float activations do not
    compress.
    """
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}.npz")
    np.savez(tmp, **arrays)
    os.replace(tmp, path)


class CaptureFile:
    """Lazy access to one (participant, input) capture: its metadata and its arrays.

    ``np.load`` on an ``.npz`` reads one array per access, so holding a capture open costs
    no memory until an anchor is read. Use as a context manager, or call :meth:`close`.

    Args:
        arrays: The ``.npz`` file.
        meta: The ``.json`` record next to it (layouts, observer record, non-finite anchors).
    """

    def __init__(self, arrays: Path, meta: Path) -> None:
        self.meta: dict[str, Any] = read_json(meta)
        self._data = np.load(arrays)

    def __getitem__(self, key: str) -> np.ndarray:
        """Read one array (an anchor key, or :data:`PLAIN_KEY`)."""
        return self._data[key]

    def keys(self) -> list[str]:
        """Keys of the stored arrays."""
        return list(self._data.files)

    def layout(self, key: str) -> str | None:
        """Layout the participant reported for anchor ``key`` (``"NHWC"``...), if any."""
        return self.meta.get("layouts", {}).get(key)

    def arrays(self) -> dict[str, np.ndarray]:
        """Read every array."""
        return {key: self._data[key] for key in self._data.files}

    def close(self) -> None:
        """Close the ``.npz`` file."""
        self._data.close()

    def __enter__(self) -> CaptureFile:
        return self

    def __exit__(
        self,
        _type: type[BaseException] | None,
        _value: BaseException | None,
        _traceback: TracebackType | None,
    ) -> None:
        self.close()
