"""What ``--keep-captures needed`` leaves in a run directory: the prune record and the
run's per-anchor statistics (the store's part that knows these two files).

* ``statistics.json.gz``: everything the analysis gathered from the captures in its
  streaming pass (per anchor and input: every participant's metrics against the consensus
  and the fp64 reference, the noise floor, introduced errors, dimension records, baseline
  statistics, observer and alignment records). Written by every analysis that read
  captures; a run whose captures were pruned is judged again from it.
* ``pruned.json``: which captures were pruned, what was kept and why, and the bytes freed.
* ``chunks/<first input>.statistics.json.gz``: while a run goes a chunk of inputs at a
  time (``--chunk``), the statistics of each chunk analysed so far, in the same layout;
  merged into ``statistics.json.gz`` and removed by the run's analysis.

``docs/run-directory.md`` describes both.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from anpred.errors import DamagedRunError
from anpred.store.files import read_json, write_json
from anpred.store.layout import RunStore

_STATISTICS = "statistics.json.gz"
_RECORD = "pruned.json"
_CHUNKS = "chunks"
_CHUNK_SUFFIX = ".statistics.json.gz"
#: Version of the statistics file's layout (:mod:`anpred.pipeline.statistics` writes it).
STATISTICS_VERSION = 1


def statistics_path(store: RunStore) -> Path:
    """The run's per-anchor statistics (gzipped JSON)."""
    return store.root / _STATISTICS


def write_statistics(store: RunStore, record: Mapping[str, Any]) -> None:
    """Write the run's per-anchor statistics atomically.

    JSON keeps every float exactly (shortest round-trip repr; NaN and infinities as
    ``NaN``/``Infinity``); gzip level 1 (measured: float text compresses ~3x at level 1,
    higher levels gain little).
    """
    _write_gz(statistics_path(store), record)


def _write_gz(path: Path, record: Mapping[str, Any]) -> None:
    tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
    # json.dumps, not json.dump: dump streams through the pure-Python encoder (the same
    # text, measured on a yolov8n run's 0.5 MB: 58-82 ms against 21-27 ms)
    text = json.dumps({"version": STATISTICS_VERSION, **record}, separators=(",", ":"))
    with gzip.open(tmp, "wb", compresslevel=1) as out:
        out.write(text.encode("utf-8"))
    os.replace(tmp, path)


def _read_gz(path: Path) -> dict[str, Any]:
    try:
        with gzip.open(path, "rt", encoding="utf-8") as data:
            record = json.load(data)
    except (OSError, ValueError, EOFError) as err:
        raise DamagedRunError(path, f"{err.__class__.__name__}: {str(err)[:120]}") from None
    if not isinstance(record, dict) or record.get("version") != STATISTICS_VERSION:
        raise DamagedRunError(path, f"not statistics of version {STATISTICS_VERSION}")
    return record


def has_statistics(store: RunStore) -> bool:
    """Whether the run's per-anchor statistics are written."""
    return statistics_path(store).exists()


def read_statistics(store: RunStore) -> dict[str, Any]:
    """The run's per-anchor statistics.

    Raises:
        DamagedRunError: Unreadable, or of a newer layout.
    """
    return _read_gz(statistics_path(store))


def write_chunk_statistics(
    store: RunStore, input_ids: Sequence[str], record: Mapping[str, Any]
) -> None:
    """Write the statistics of one chunk of inputs (named by its first input), atomically."""
    folder = store.root / _CHUNKS
    folder.mkdir(exist_ok=True)
    _write_gz(folder / f"{input_ids[0]}{_CHUNK_SUFFIX}", record)


def read_chunk_statistics(store: RunStore) -> list[dict[str, Any]]:
    """The statistics of every chunk analysed so far (``[]``: none, or not a chunked run).

    Raises:
        DamagedRunError: A chunk's file is unreadable.
    """
    folder = store.root / _CHUNKS
    if not folder.is_dir():
        return []
    return [_read_gz(path) for path in sorted(folder.glob(f"*{_CHUNK_SUFFIX}"))]


def remove_chunk_statistics(store: RunStore) -> None:
    """Remove the chunks' statistics (once merged into the run's)."""
    shutil.rmtree(store.root / _CHUNKS, ignore_errors=True)


def has_prune_record(store: RunStore) -> bool:
    """Whether captures of the run were pruned."""
    return (store.root / _RECORD).exists()


def read_prune_record(store: RunStore) -> dict[str, Any] | None:
    """The prune record, or ``None`` when nothing was pruned."""
    path = store.root / _RECORD
    return read_json(path, dict) if path.exists() else None


def write_prune_record(store: RunStore, record: Mapping[str, Any]) -> None:
    """Write the prune record."""
    write_json(store.root / _RECORD, dict(record))
