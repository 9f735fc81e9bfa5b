"""Pruning one capture (``ParticipantStore.prune_capture``), reading a pruned capture, and
the run's statistics and prune record files."""

from __future__ import annotations

import numpy as np
import pytest

from anpred.errors import DamagedRunError
from anpred.store import CAPTURE, ISOLATED, ParticipantStore, RunStore
from anpred.store.files import PrunedCaptureError
from anpred.store.pruning import (
    read_prune_record,
    read_statistics,
    statistics_path,
    write_prune_record,
    write_statistics,
)


def _folder(tmp_path, name: str = "onnxruntime") -> ParticipantStore:
    folder = ParticipantStore(tmp_path / "captures" / name).create()
    arrays = {
        "a": np.arange(1000, dtype=np.float32),
        "b": np.ones((50, 50), np.float32),
        "__plain__": np.zeros(10, np.float32),
    }
    folder.write_capture("in1", arrays, {"layouts": {"b": "NHWC"}})
    folder.write_capture("in1", arrays, {}, ISOLATED)
    return folder


def test_prune_keeps_the_listed_arrays_and_the_capture_stays_done(tmp_path) -> None:
    folder = _folder(tmp_path)
    size = folder.arrays_path("in1").stat().st_size
    freed = folder.prune_capture("in1", {"a"})
    assert 0 < freed < size and freed == size - folder.arrays_path("in1").stat().st_size
    assert folder.capture_done("in1") and folder.finished_inputs() == ["in1"]  # resume: done
    assert folder.pruned_keys("in1") == ["__plain__", "b"]
    assert folder.read_capture_meta("in1")["layouts"] == {"b": "NHWC"}  # the record stays
    with folder.open_capture("in1") as capture:
        assert np.array_equal(capture["a"], np.arange(1000, dtype=np.float32))
        assert capture.keys() == ["a"]
        with pytest.raises(PrunedCaptureError, match="'b' was pruned.*--keep-captures all"):
            capture["b"]
        with pytest.raises(PrunedCaptureError):  # a partial capture is never read whole
            capture.arrays()
    assert folder.pruned_keys("in1", ISOLATED) == []  # the other kind is untouched
    assert folder.prune_capture("in1", {"a"}) == 0  # idempotent


def test_pruning_everything_removes_the_file(tmp_path) -> None:
    folder = _folder(tmp_path)
    size = folder.arrays_path("in1", ISOLATED).stat().st_size
    assert folder.prune_capture("in1", (), ISOLATED) == size
    assert not folder.arrays_path("in1", ISOLATED).exists()
    assert folder.capture_done("in1", ISOLATED)
    capture = folder.open_capture("in1", ISOLATED)
    assert capture is not None and capture.keys() == []
    with pytest.raises(PrunedCaptureError):
        capture["a"]
    with pytest.raises(PrunedCaptureError):
        folder.load_capture("in1", ISOLATED)
    capture.close()
    assert folder.prune_capture("in1", (), ISOLATED) == 0


def test_an_interrupted_prune_is_finished(tmp_path) -> None:
    folder = _folder(tmp_path)
    meta = folder.read_capture_meta("in1")
    # killed after the record was written, before the arrays were rewritten
    from anpred.store.files import write_json

    write_json(folder.folder / "in1.capture.json", {**meta, "pruned": ["b"]})
    assert folder.prune_capture("in1", {"a", "b"}) > 0  # b is gone for good, __plain__ too
    with np.load(folder.arrays_path("in1")) as data:
        assert data.files == ["a"]
    assert folder.pruned_keys("in1") == ["__plain__", "b"]


def test_a_linked_capture_is_replaced_not_its_target(tmp_path) -> None:
    source = _folder(tmp_path, "source")
    linked = ParticipantStore(tmp_path / "other" / "onnxruntime").create()
    assert linked.link_capture_from(source, "in1", "x")
    assert linked.prune_capture("x", {"a"}) == 0  # nothing of this run's own is freed
    assert not linked.arrays_path("x").is_symlink()
    with np.load(source.arrays_path("in1")) as data:
        assert sorted(data.files) == ["__plain__", "a", "b"]
    assert source.pruned_keys("in1") == []
    assert linked.prune_capture("x", ()) > 0


def test_statistics_round_trip_exactly(tmp_path) -> None:
    store = RunStore.create(tmp_path / "run", {"model": "m"})
    record = {"metrics": ["rel_l2"], "evidence": {"a": [{"x": 0.1 + 0.2, "y": float("nan")}]}}
    write_statistics(store, record)
    back = read_statistics(store)
    assert back["evidence"]["a"][0]["x"] == 0.1 + 0.2 and np.isnan(back["evidence"]["a"][0]["y"])
    assert back["version"] == 1
    statistics_path(store).write_bytes(b"not gzip")
    with pytest.raises(DamagedRunError):
        read_statistics(store)


def test_prune_record(tmp_path) -> None:
    store = RunStore.create(tmp_path / "run", {"model": "m"})
    assert read_prune_record(store) is None
    write_prune_record(store, {"mode": "needed", "pruned": {"torch": {CAPTURE: ["in1"]}}})
    assert read_prune_record(store)["pruned"]["torch"]["capture"] == ["in1"]


def test_a_damaged_pruned_field_is_a_damaged_run(tmp_path) -> None:
    from anpred.store.files import write_json

    folder = _folder(tmp_path)
    write_json(folder.folder / "in1.capture.json", {"pruned": 3})
    with pytest.raises(DamagedRunError, match="not a list of array names"):
        folder.open_capture("in1")
    with pytest.raises(DamagedRunError):
        folder.prune_capture("in1", {"a"})
