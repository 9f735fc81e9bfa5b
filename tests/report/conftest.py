"""Summaries for the report tests.

``data/summary.json`` is the real summary of a yolov8n run (torch, onnxruntime, openvino vs
the fp64 reference, 2 inputs, stage anchors; no findings). The other fixtures derive
from it: one with findings added, one partial (a crashed participant, no localization or
characterization), one hostile (HTML in every user-provided string).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

SAMPLE = Path(__file__).parent / "data" / "summary.json"
HOSTILE = "<script>alert(1)</script>"


@pytest.fixture(scope="session")
def _sample() -> dict[str, Any]:
    return json.loads(SAMPLE.read_text())


@pytest.fixture
def sample(_sample: dict[str, Any]) -> dict[str, Any]:
    """The real summary (a fresh copy per test)."""
    return copy.deepcopy(_sample)


def _finding(participant: str, anchor: str, input_id: str, value: float) -> dict[str, Any]:
    return {"participant": participant, "anchor": anchor, "input": input_id,
            "metrics": {"metric": "rel_l2", "value": value, "population_median": 5e-6,
                        "mad": 1e-6, "scale": 1.4826e-6, "outlier_threshold": 1e-5,
                        "noise_floor": 6e-6, "noise_threshold": 6e-5, "vs_fp64": value * 1.1,
                        "pairwise": False, "non_finite": 0,
                        "exceeded": "noise_floor,outlier", "passed": False},
            "corroborating": ["wasserstein", "max_abs"]}


@pytest.fixture
def with_findings(sample: dict[str, Any]) -> dict[str, Any]:
    """The sample with three openvino findings emerging at neck.p4 (one masked at the output)."""
    sample["findings"] = [_finding("openvino", "neck.p4", "bus", 3.1e-4),
                          _finding("openvino", "neck.p5", "bus", 4.2e-4),
                          _finding("openvino", "neck.p4", "zidane", 2.5e-4)]
    dist = sample["localization"]["participants"]["openvino"]["emergence_distribution"]
    dist["counts"]["neck.p4"] = 2
    dist.update(most_common="neck.p4", earliest="neck.p4", n_clean=0)
    sample["deviation"]["vs_consensus"]["openvino"]["neck.p4"] = 2.8e-4
    sample["characterization"]["masking"]["n_cases_with_inner_finding"] = 2
    sample["characterization"]["masking"]["masked_cases"]["polygraphy_allclose"] = 1
    sample["wall_seconds"] = 83.4
    return sample


@pytest.fixture
def partial(sample: dict[str, Any]) -> dict[str, Any]:
    """An interrupted run: tensorflow crashed, openvino unjudged, no localization/character."""
    sample["participants"].append({
        "participant": "tensorflow", "library": "tensorflow", "status": "crash", "step": "load",
        "message": "Segmentation fault (core dumped) while importing <tensorflow>",
        "version": "", "settings": {}, "timings": {}, "returncode": -11, "inputs_done": 0,
        "status_detail": {}, "observer": {"inputs": 0, "identical": True, "max_abs_diff": None},
    })
    for key in ("localization", "characterization", "baseline_details", "alignment"):
        del sample[key]
    for table in sample["deviation"].values():
        table.pop("openvino")
    sample["deviation"]["vs_fp64"]["torch"]["output"] = None
    sample["noise_floor"]["output"] = None
    sample["findings"] = []
    sample["unaligned"] = [{"participant": "openvino", "anchor": "output", "input": "bus",
                            "reason": "shape (1, 8400, 84) cannot be aligned to (1, 84, 8400)"},
                           {"input": "zidane", "reason": "no fp64 reference capture"}]
    return sample


@pytest.fixture
def hostile(with_findings: dict[str, Any]) -> dict[str, Any]:
    """HTML in the model path, an input id, a participant, a message and a setting value."""
    s = with_findings
    s["model"]["name"] = HOSTILE
    s["options"]["model"] = HOSTILE
    s["inputs"][0] = {"id": HOSTILE, "source": f"/data/{HOSTILE}.jpg"}
    s["participants"][2]["participant"] = HOSTILE
    s["participants"][2]["status_detail"]["settings"]["precision"] = HOSTILE
    s["participants"].append({"participant": "jax", "status": "error", "step": "execute",
                              "message": HOSTILE, "observer": {}})
    for table in s["deviation"].values():
        table[HOSTILE] = table.pop("openvino")
    for f in s["findings"]:
        f["participant"] = HOSTILE
        f["input"] = HOSTILE
    s["unaligned"] = [{"participant": HOSTILE, "anchor": "output", "input": HOSTILE,
                       "reason": HOSTILE}]
    return s
