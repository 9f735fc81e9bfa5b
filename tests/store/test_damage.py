"""A damaged run directory is told apart from a bug: find_damage names the damaged files."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from anpred.store.damage import find_damage

GOLDEN = Path(__file__).parents[1] / "pipeline" / "data" / "golden_run"


def test_an_intact_run_has_no_damage(tmp_path: Path) -> None:
    run_dir = shutil.copytree(GOLDEN, tmp_path / "run")
    assert find_damage(run_dir) == []


def test_each_kind_of_damage_is_named(tmp_path: Path) -> None:
    run_dir = shutil.copytree(GOLDEN, tmp_path / "run")
    record = run_dir / "captures" / "jax" / "bus.capture.json"
    record.write_text(json.dumps({**json.loads(record.read_text()), "layouts": False}))
    (run_dir / "captures" / "openvino" / "zidane.capture.npz").write_bytes(b"PK\x03\x04 cut")
    (run_dir / "model.json").write_text("{}")
    (run_dir / "captures" / "torch" / "bus.isolated.npz").unlink()
    problems = find_damage(run_dir)
    assert len(problems) == 4, problems
    for name in ("bus.capture.json", "zidane.capture.npz", "model.json", "bus.isolated.npz"):
        assert any(name in p for p in problems), name
    assert all("\n" not in p for p in problems)
