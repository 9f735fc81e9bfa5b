"""Sorted captures kept across the passes of a campaign's fault runs.

The Wasserstein distances of an (anchor, input) sort every participant's capture and the
fp64 reference's (:mod:`anpred.analysis.onepass`). A campaign's fault runs of one model
read the same files for every participant but the faulty one (the clean run's captures,
linked), so the same arrays were sorted once per fault run. Inside :func:`kept`, a sorted
row is kept under the key its caller gives (the capture file and the anchor: the same
values) and copied back instead of sorting again -- the same numbers, bit for bit (a sort
has one result); so is a capture's descriptor (its channel moments). At most
:data:`LIMIT_BYTES` are kept, the oldest dropped first; outside :func:`kept` nothing is.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable, Iterator
from contextlib import contextmanager

import numpy as np

#: Bytes of sorted rows kept at most (yolov8n's captures of two inputs: ~280 MB).
LIMIT_BYTES = 768 * 2**20

_rows: OrderedDict[Hashable, np.ndarray] = OrderedDict()
_state = {"on": 0, "bytes": 0}


@contextmanager
def kept() -> Iterator[None]:
    """Keep sorted rows within the block (nested blocks share them); drop them after."""
    _state["on"] += 1
    try:
        yield
    finally:
        _state["on"] -= 1
        if not _state["on"]:
            _rows.clear()
            _state["bytes"] = 0


def active() -> bool:
    """Whether sorted rows are kept now."""
    return _state["on"] > 0


def get(key: Hashable | None) -> np.ndarray | None:
    """The sorted row kept under ``key`` (``None``: none, or not keeping)."""
    if key is None or not _state["on"]:
        return None
    return _rows.get(key)


def put(key: Hashable | None, row: np.ndarray) -> None:
    """Keep a copy of the sorted ``row`` under ``key`` (while :func:`kept`)."""
    if key is None or not _state["on"] or key in _rows or row.nbytes > LIMIT_BYTES:
        return
    _rows[key] = row.copy()
    _state["bytes"] += row.nbytes
    while _state["bytes"] > LIMIT_BYTES:
        _, dropped = _rows.popitem(last=False)
        _state["bytes"] -= dropped.nbytes
