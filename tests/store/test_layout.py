"""The run store: format marker, reading a format-1 directory, refusing a newer one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from anpred.errors import UsageError
from anpred.store import FORMAT, ISOLATED, PLAIN_KEY, ParticipantStore, RunStore, safe_name

#: A run directory written before the run store existed (format 1, no marker).
GOLDEN = Path(__file__).parents[1] / "pipeline" / "data" / "golden_run"


@pytest.fixture
def golden(tmp_path: Path) -> Path:
    run_dir = tmp_path / "golden"
    shutil.copytree(GOLDEN, run_dir, symlinks=True)
    return run_dir


def test_create_writes_the_format_marker_and_settings(tmp_path: Path) -> None:
    store = RunStore.create(tmp_path / "run", {"model": "m"})
    assert json.loads((store.root / "store.json").read_text()) == {"format": FORMAT}
    assert store.format == FORMAT and store.is_empty() is False
    assert RunStore.open(store.root).read_settings() == {"model": "m"}


def test_a_format_1_directory_reads(golden: Path) -> None:
    assert not (golden / "store.json").exists()
    store = RunStore.open(golden)
    assert store.format == 1
    assert store.read_input_ids() == ["bus", "zidane", "synthetic0", "synthetic1", "synthetic2"]
    assert [a["key"] for a in store.read_export()["anchors"]] == ["r1", "s2", "output"]
    assert list(store.read_participants())[0] == "torch[fp64]"
    openvino = store.participant("openvino")
    assert openvino.read_status()["state"] == "ok"
    assert openvino.finished_inputs() == sorted(store.read_input_ids())
    with openvino.open_capture("bus") as capture:
        assert set(capture.keys()) == {"r1", "s2", "output", PLAIN_KEY}
        assert capture["output"].dtype == np.float32 and capture.layout("output") is None
        assert capture.meta["observer"]["identical"] is True
    assert store.participant("onnxruntime[bf16]@s2").folder.name == "onnxruntime_bf16_s2"
    # stage isolation ran against the fp64 reference, not for it
    assert store.participant("torch[fp64]").open_capture("bus", ISOLATED) is None
    assert set(openvino.load_capture("bus", ISOLATED)) == {"r1", "s2", "output"}
    assert len(store.read_deviations()) > 0 and store.read_summary()["findings"]


def test_a_newer_format_is_refused_in_one_line(golden: Path) -> None:
    (golden / "store.json").write_text(json.dumps({"format": FORMAT + 1}))
    with pytest.raises(UsageError) as err:
        RunStore.open(golden)
    message = str(err.value)
    assert f"written by anpred format {FORMAT + 1}" in message and f"≤ {FORMAT}" in message
    assert "\n" not in message
    proc = subprocess.run(
        [sys.executable, "-m", "anpred", "report", str(golden)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [f"anpred: error: {message}"]


@pytest.mark.parametrize("marker", ["not json", '{"format": "two"}', "[]"])
def test_an_unreadable_marker_is_refused(golden: Path, marker: str) -> None:
    (golden / "store.json").write_text(marker)
    with pytest.raises(UsageError, match="store"):
        RunStore.open(golden)


def test_a_folder_without_settings_is_not_a_run(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="is not an anpred run directory"):
        RunStore.open(tmp_path)


def test_capture_round_trip_and_done_marker(tmp_path: Path) -> None:
    folder = ParticipantStore(tmp_path / "p").create()
    assert not folder.capture_done("a") and folder.open_capture("a") is None
    arrays = {"x": np.arange(6, dtype=np.float32).reshape(2, 3), PLAIN_KEY: np.ones(2)}
    folder.write_capture("a", arrays, {"layouts": {"x": "NHWC"}})
    folder.write_capture("b", {"x": np.zeros(1)}, {"layouts": {}}, ISOLATED)
    assert folder.capture_done("a") and not folder.capture_done("b")
    assert folder.finished_inputs() == ["a"] and folder.finished_inputs(ISOLATED) == ["b"]
    loaded = folder.load_capture("a")
    assert set(loaded) == set(arrays) and np.array_equal(loaded["x"], arrays["x"])
    with folder.open_capture("a") as capture:
        assert capture.layout("x") == "NHWC" and np.array_equal(capture["x"], arrays["x"])


def test_derive_links_the_base_and_kept_participants(golden: Path, tmp_path: Path) -> None:
    base = RunStore.open(golden)
    derived = RunStore.derive(tmp_path / "d", base, ["torch", "jax"], {"model": "x"})
    assert derived.format == FORMAT and derived.read_settings() == {"model": "x"}
    assert derived.read_input_ids() == base.read_input_ids()
    assert derived.inputs_path.is_symlink()
    assert derived.participant("torch").folder.is_symlink()
    assert not derived.participant("openvino").folder.exists()
    assert [p.folder.name for p in derived.participant_folders()] == ["jax", "torch"]
    # resumable: deriving again keeps the links
    RunStore.derive(tmp_path / "d", base, ["torch", "jax"], {"model": "x"})


def test_safe_name_is_idempotent() -> None:
    assert safe_name("torch[fp64]") == "torch_fp64"
    assert safe_name(safe_name("onnxruntime[bf16]@s2")) == safe_name("onnxruntime[bf16]@s2")
