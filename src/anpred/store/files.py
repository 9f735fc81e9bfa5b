"""File formats of the run store: atomic JSON and ``.npz`` writes, and the capture reader.

Private to :mod:`anpred.store`: other modules reach files through
:class:`~anpred.store.layout.RunStore` and :class:`~anpred.store.layout.ParticipantStore`.
"""

from __future__ import annotations

import json
import math
import mmap
import os
import struct
import zipfile
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO

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


def _member(data: Any, key: str, file: BinaryIO) -> tuple[int, int] | None:
    """Where array ``key``'s ``.npy`` bytes lie in ``file``: ``(start, size)``; ``None`` for
    a compressed member.

    Raises:
        KeyError: No such array.
        zipfile.BadZipFile: The member's local header is missing.
    """
    info = data.zip.getinfo(f"{key}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        return None
    file.seek(info.header_offset)
    header = file.read(_LOCAL_HEADER_SIZE)
    if len(header) != _LOCAL_HEADER_SIZE or not header.startswith(_LOCAL_HEADER):
        raise zipfile.BadZipFile(f"no local header for {key!r}")
    name_size = int.from_bytes(header[26:28], "little")
    extra_size = int.from_bytes(header[28:30], "little")
    return info.header_offset + _LOCAL_HEADER_SIZE + name_size + extra_size, info.file_size


def read_stored_array(data: Any, key: str, path: Path) -> np.ndarray:
    """Read one array of an opened ``.npz`` straight from the file, without the zip CRC.

    :func:`write_arrays` stores members uncompressed, each array's data at a multiple of
    :data:`ALIGN` bytes, so an array is bytes at an offset in the file: it is returned as a
    view of those bytes, memory-mapped copy-on-write (writeable; what is written never
    reaches the file), its pages those of the OS cache, unmapped when the array is freed.
    Measured on the 13 capture files of one yolov8n input (280 MB), each array read and
    summed once: 0.25 -> 0.09 CPU s against reading them with ``np.fromfile``; the
    analysis of one such input (``collect``): 1.05 -> 0.94 CPU s. Data that is not aligned
    for its dtype (a file ``np.savez`` wrote) is read with ``np.fromfile``, which still
    skips zipfile's CRC-32 over every byte and its chunked copies.

    Truncation is still refused: a cut file has no zip directory, so :func:`load_npz` fails,
    and an array that is shorter than its ``.npy`` header says, or does not end where its
    zip member ends, is refused. Every writer of the run store replaces files whole
    (:func:`write_arrays`, :func:`write_json`) or removes them, so a mapped file is never cut
    short under its readers; removal or replacement leaves the mapping on the old file. A
    flipped bit inside an array is not detected here; :func:`read_array` (used by
    :func:`anpred.store.damage.find_damage`) still checks the CRC. Compressed members take
    :func:`read_array`.

    Raises:
        DamagedRunError: The array is missing, cut short, or holds Python objects.
    """
    try:
        with open(path, "rb") as file:
            bounds = _member(data, key, file)
            if bounds is None:
                return read_array(data, key, path)
            shape, fortran, dtype, at = _npy_header(file, key, *bounds)
            count = math.prod(shape)
            if count == 0:
                flat = np.empty(0, dtype)
            elif at % dtype.alignment == 0:
                flat = _mapped(file, at, count * dtype.itemsize, dtype)
            else:
                file.seek(at)
                flat = np.fromfile(file, dtype=dtype, count=count)
                if flat.size != count:
                    raise EOFError(f"array {key!r} is cut short")
        return flat.reshape(shape[::-1]).T if fortran else flat.reshape(shape)
    except (KeyError, OSError, ValueError, EOFError, zipfile.BadZipFile) as err:
        raise DamagedRunError(path, _reason(err)) from None


def _npy_header(
    file: BinaryIO, key: str, start: int, size: int
) -> tuple[tuple[int, ...], bool, np.dtype, int]:
    """The ``.npy`` header of the member at ``[start, start + size)`` of ``file`` (numpy's
    own reader): shape, Fortran order, dtype, and where the data starts in the file.

    Raises:
        ValueError: A header numpy does not read, an object dtype, or data that does not
            fill the member exactly.
    """
    file.seek(start)
    version = np.lib.format.read_magic(file)
    read_header = {
        (1, 0): np.lib.format.read_array_header_1_0,
        (2, 0): np.lib.format.read_array_header_2_0,
    }.get(version)
    if read_header is None:
        raise ValueError(f"array {key!r}: .npy version {version} is not read here")
    shape, fortran, dtype = read_header(file)
    data_start = file.tell()
    if dtype.hasobject:
        raise ValueError(f"array {key!r} holds Python objects (not read: no pickle)")
    if data_start + math.prod(shape) * dtype.itemsize != start + size:
        raise ValueError(f"array {key!r} does not fill its zip member exactly")
    return shape, fortran, dtype, data_start


def _mapped(file: BinaryIO, at: int, length: int, dtype: np.dtype) -> np.ndarray:
    """``length`` bytes of ``file`` from ``at``, memory-mapped copy-on-write, as a flat array.

    The mapping starts at the page below ``at`` (mappings start on page boundaries) and
    lasts as long as the array (or a view of it) does; the descriptor may be closed.
    """
    base = at - at % mmap.ALLOCATIONGRANULARITY
    mapping = mmap.mmap(file.fileno(), at + length - base, access=mmap.ACCESS_COPY, offset=base)
    return np.frombuffer(mapping, dtype=dtype, count=length // dtype.itemsize, offset=at - base)


#: Where each array's data starts in the files :func:`write_arrays` writes: a multiple of this
#: many bytes (a cache line; numpy pads a ``.npy`` header to it as well).
ALIGN = 64
_PADDING_FIELD = 0xD935  # the id of the zip extra field that pads (as Android's zipalign)


def write_arrays(path: Path, arrays: Mapping[str, np.ndarray]) -> None:
    """Write arrays as an ``.npz`` atomically, each array's data aligned to :data:`ALIGN`.

    The file is what ``np.savez`` writes (``np.load`` and any zip reader read it), except
    that every member's local header carries an extra field of padding so that its data
    starts at a multiple of :data:`ALIGN` bytes: :func:`read_stored_array` then maps it
    as it is (misaligned data is read into a copy). Uncompressed on purpose: measured on
    yolov8n captures, zlib saved ~10 % of disk at 0.116 s/MB against 0.0027 s/MB
    (benchmarks/bench_run.py) -- float activations do not compress.

    Raises:
        ValueError: An array holds Python objects (never pickled).
    """
    path = Path(path)
    tmp = path.with_name(f".{path.stem}.tmp{os.getpid()}.npz")
    try:
        with zipfile.ZipFile(tmp, "w", zipfile.ZIP_STORED, allowZip64=True) as archive:
            for key, value in arrays.items():
                array = np.asanyarray(value)
                info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                zip64 = array.nbytes + (1 << 20) > zipfile.ZIP64_LIMIT  # header room included
                header = _LOCAL_HEADER_SIZE + len(info.filename.encode()) + 20 * zip64
                info.extra = _padding(archive.fp.tell() + header)  # 20: the zip64 field
                with archive.open(info, "w", force_zip64=zip64) as member:
                    _write_npy(member, array)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def _write_npy(member: BinaryIO, array: np.ndarray) -> None:
    """Write ``array`` as ``np.lib.format.write_array`` does, byte for byte; a C-contiguous
    array's data from its own buffer.

    ``write_array`` copies the data to bytes in 16 MiB chunks before the zip member gets
    them (``tobytes``); here the member reads the array's memory. Measured on eight
    yolov8n captures (147 MB): 0.13 -> 0.12 CPU s; what is left is the member's CRC-32 and
    the kernel's copy into the page cache. Fortran-ordered, non-contiguous and object
    arrays take ``write_array`` (the last refused: no pickle).
    """
    fmt = np.lib.format
    if not array.flags.c_contiguous or array.dtype.hasobject:
        fmt.write_array(member, array, allow_pickle=False)
        return
    fmt.write_array_header_1_0(member, fmt.header_data_from_array_1_0(array))
    if array.nbytes:
        member.write(memoryview(array.reshape(-1).view(np.uint8)))


def _padding(header_end: int) -> bytes:
    """A zip extra field that moves ``header_end`` to the next multiple of :data:`ALIGN`
    (a field is at least 4 bytes: its id and size).
    """
    pad = -header_end % ALIGN
    if pad == 0:
        return b""
    if pad < 4:
        pad += ALIGN
    return struct.pack("<HH", _PADDING_FIELD, pad - 4) + bytes(pad - 4)


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
        """Close the ``.npz`` file (arrays already read stay valid)."""
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
