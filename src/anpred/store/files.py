"""File formats of the run store: atomic JSON and ``.npz`` writes, and the capture reader.

Private to :mod:`anpred.store`: other modules reach files through
:class:`~anpred.store.layout.RunStore` and :class:`~anpred.store.layout.ParticipantStore`.
"""

from __future__ import annotations

import json
import os
import zipfile
from pathlib import Path
from types import TracebackType
from typing import Any

import numpy as np

from anpred.errors import AnpredError, DamagedRunError

#: Key of the observer-effect output (final output without anchors) inside a capture file.
PLAIN_KEY = "__plain__"
#: Field of a capture's ``.json`` record listing the arrays ``--keep-captures needed`` removed
#: after the run was judged (absent: nothing removed).
PRUNED_FIELD = "pruned"


class PrunedCaptureError(AnpredError):
    """An array of a capture was removed after the run was judged (``--keep-captures needed``)."""


def pruned_field(meta: dict[str, Any], path: Path) -> list[str]:
    """The arrays a capture's record says were pruned.

    Raises:
        DamagedRunError: The field is not a list of names.
    """
    value = meta.get(PRUNED_FIELD) or []
    if not isinstance(value, list) or not all(isinstance(k, str) for k in value):
        raise DamagedRunError(path, f"its {PRUNED_FIELD!r} is not a list of array names")
    return value


def write_json(path: Path, data: Any) -> None:
    """Write JSON atomically (write a temporary file, then rename)."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    tmp.write_text(json.dumps(data, indent=1, default=str))
    os.replace(tmp, path)


def _reason(err: BaseException) -> str:
    text = str(err).splitlines()[0][:120] if str(err) else ""
    return f"{err.__class__.__name__}: {text}" if text else err.__class__.__name__


def read_json(path: Path, kind: type | None = None) -> Any:
    """Read a JSON file of a run directory.

    Args:
        path: The file.
        kind: The type its top-level value must have (e.g. ``dict``), if any.

    Raises:
        DamagedRunError: The file is unreadable, not JSON, or of the wrong shape.
    """
    try:
        value = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError) as err:  # ValueError: JSON and UTF-8 decoding errors
        raise DamagedRunError(path, _reason(err)) from None
    if kind is not None and not isinstance(value, kind):
        raise DamagedRunError(path, f"holds a {type(value).__name__}, not a {kind.__name__}")
    return value


def load_npz(path: Path) -> Any:
    """Open an ``.npz`` of a run directory lazily (arrays are read on access).

    Raises:
        DamagedRunError: The file is unreadable or not an ``.npz``.
    """
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise DamagedRunError(path, _reason(err)) from None


def read_array(data: Any, key: str, path: Path) -> np.ndarray:
    """Read one array of an opened ``.npz``.

    Raises:
        DamagedRunError: The array is missing, corrupt, or holds Python objects.
        KeyError: Never: a missing key is a damaged file here.
    """
    try:
        return data[key]
    except (KeyError, OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise DamagedRunError(path, _reason(err)) from None


_LOCAL_HEADER = b"PK\x03\x04"
_LOCAL_HEADER_SIZE = 30  # fixed part of a zip local file header


def read_stored_array(data: Any, key: str, path: Path) -> np.ndarray:
    """Read one array of an opened ``.npz`` straight from the file, without the zip CRC.

    :func:`write_arrays` stores members uncompressed, so an array is its ``.npy`` bytes at
    an offset in the file: this reads them with ``np.fromfile``, skipping zipfile's CRC-32
    over every byte and its chunked copies (measured on six 6.5 MB float32 arrays: 13 ms ->
    6 ms CPU). Truncation is still refused: a cut file has no zip directory, so
    :func:`load_npz` fails, and an array that is shorter than its ``.npy`` header says, or
    does not end where its zip member ends, is refused. A flipped bit inside an array is
    not detected here; :func:`read_array` (used by
    :func:`anpred.store.damage.find_damage`) still checks the CRC. Compressed members take
    :func:`read_array`.

    Raises:
        DamagedRunError: The array is missing, cut short, or holds Python objects.
    """
    try:
        info = data.zip.getinfo(f"{key}.npy")
        if info.compress_type != zipfile.ZIP_STORED:
            return read_array(data, key, path)
        with open(path, "rb") as file:
            file.seek(info.header_offset)
            header = file.read(_LOCAL_HEADER_SIZE)
            if len(header) != _LOCAL_HEADER_SIZE or not header.startswith(_LOCAL_HEADER):
                raise zipfile.BadZipFile(f"no local header for {key!r}")
            name_size = int.from_bytes(header[26:28], "little")
            extra_size = int.from_bytes(header[28:30], "little")
            start = info.header_offset + _LOCAL_HEADER_SIZE + name_size + extra_size
            file.seek(start)
            array = np.lib.format.read_array(file, allow_pickle=False)
            if file.tell() != start + info.file_size:  # it ran into the next member
                raise ValueError(f"array {key!r} does not fill its zip member exactly")
            return array
    except (KeyError, OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise DamagedRunError(path, _reason(err)) from None


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
        self.meta: dict[str, Any] = read_json(meta, dict)
        self.path = Path(arrays)
        self.pruned: frozenset[str] = frozenset(pruned_field(self.meta, Path(meta)))
        # every array pruned: the file is gone (or going)
        self._data = load_npz(arrays) if arrays.exists() or not self.pruned else None

    def __getitem__(self, key: str) -> np.ndarray:
        """Read one array (an anchor key, or :data:`PLAIN_KEY`).

        Raises:
            PrunedCaptureError: The array was pruned after the run was judged.
            DamagedRunError: The array is missing or corrupt.
        """
        if key in self.pruned or self._data is None:
            raise PrunedCaptureError(
                f"{self.path.name}: array {key!r} was pruned after the run was judged "
                "(--keep-captures needed); re-run with --keep-captures all to keep it"
            )
        return read_stored_array(self._data, key, self.path)

    def keys(self) -> list[str]:
        """Keys of the stored arrays (pruned ones excluded)."""
        if self._data is None:
            return []
        return [k for k in self._data.files if k not in self.pruned]

    def layout(self, key: str) -> str | None:
        """Layout the participant reported for anchor ``key`` (``"NHWC"``...), if any."""
        return self.meta.get("layouts", {}).get(key)

    def arrays(self) -> dict[str, np.ndarray]:
        """Read every array.

        Raises:
            PrunedCaptureError: Some of its arrays were pruned (a partial capture would
                silently lack anchors).
        """
        if self.pruned:
            raise PrunedCaptureError(
                f"{self.path.name}: {len(self.pruned)} of its arrays were pruned after the run "
                "was judged (--keep-captures needed); re-run with --keep-captures all"
            )
        return {key: self[key] for key in self.keys()}

    def close(self) -> None:
        """Close the ``.npz`` file."""
        if self._data is not None:
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
