"""The streaming pass hands float32 captures to the compiled loops as they are: the same
records as when every capture is aligned to a float64 copy first."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from pool_helpers import GOLDEN

from anpred.analysis import onepass
from anpred.analysis.oracle import OracleParams
from anpred.pipeline import evidence
from anpred.progress import quiet
from anpred.store import RunStore

FIELDS = ("evidence", "baselines", "introduced", "dimension", "alignment", "unaligned", "observer")


def _collect(run: Path):
    store = RunStore(run)
    names = [p for p in store.read_participants() if p != "torch[fp64]"]
    anchors = [a["key"] for a in store.read_export()["anchors"]]
    ids = store.read_input_ids()
    return evidence.collect(run, names, "torch[fp64]", "torch", anchors, ids, OracleParams(), quiet)


def test_float32_captures_give_the_records_of_their_float64_copies(monkeypatch) -> None:
    if onepass.kernels() is None:
        pytest.skip("numba is not installed: no compiled loops, no float32 hand-over")
    previous = onepass.use_compiled(True)
    try:
        widths = []
        align = evidence.align

        def seen(*args, **kwargs):
            aligned = align(*args, **kwargs)
            widths.append(aligned.values.dtype)
            return aligned

        monkeypatch.setattr(evidence, "align", seen)
        narrow = _collect(GOLDEN)
        assert np.dtype(np.float32) in widths  # the hand-over happened
        widths.clear()

        def wide(*args, **kwargs):  # as before: every capture to float64 (only the isolated
            # ones, aligned without a reference, stay float32)
            kwargs["keep_float32"] = kwargs.get("keep_float32") and "reference" not in kwargs
            return seen(*args, **kwargs)

        monkeypatch.setattr(evidence, "align", wide)
        expected = _collect(GOLDEN)
        assert np.dtype(np.float64) in widths
    finally:
        onepass.use_compiled(previous)
    assert narrow.evidence and narrow.baselines and narrow.introduced
    for field in FIELDS:
        assert getattr(narrow, field) == getattr(expected, field), field
