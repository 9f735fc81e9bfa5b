"""Run the fault chain in one library with a list of faults; save every capture.

``python fault_check.py LIBRARY EXPORT_DIR CASES.json OUT_DIR`` (run by the tests in a
subprocess, so that the test process imports no DL library and no two libraries share a
process). For the clean participant (before and after the faulty ones) and for every case
it writes ``OUT_DIR/<case>.npz`` with ``infer/<anchor>``, ``isolated/<anchor>`` (stage
isolation fed with the clean run's anchors) and ``plain`` (the plain graph's output), and
``OUT_DIR/results.json`` with each case's ``describe_settings()`` and the fault its
transform records (what the worker writes into ``status.json``), or its error.

Each fault is planned and applied as ``anpred run`` does: planned in this (main) process
into a transform (:func:`anpred.inject.transforms.fault_transform`), applied around the
library's runner exactly as the worker applies it
(:class:`anpred.interchange.transform.Transforms`).
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import numpy as np

from anpred.backends.base import Capture, ModelJob
from anpred.backends.registry import runner_class
from anpred.inject.spec import FaultSpec
from anpred.inject.transforms import fault_transform, recorded_fault
from anpred.interchange.export import AnchoredExport, load_export
from anpred.interchange.transform import TRANSFORMS_KEY, Transforms, transform_from_record

sys.path.insert(0, str(Path(__file__).parent))
from fault_chain import feed  # noqa: E402


def _nchw(capture: Capture) -> dict[str, np.ndarray]:
    """The capture in ONNX's layout (what stage isolation is fed with)."""
    return {
        k: v.transpose(0, 3, 1, 2) if capture.layouts.get(k) == "NHWC" else v
        for k, v in capture.arrays.items()
    }


def _transforms(
    library: str, export: AnchoredExport, fault: dict | None, folder: Path
) -> Transforms:
    """The fault planned here, then rebuilt from its record (as the worker does)."""
    if fault is None:
        return Transforms()
    planned = fault_transform(library, FaultSpec.from_dict(fault), export, folder)
    return Transforms((transform_from_record(planned.record()),))


def _run(library: str, job: ModelJob, transforms: Transforms, fed: dict | None) -> dict:
    job = transforms.model(job)  # ONNX files: torch runs its translators (for_job)
    runner = runner_class(library).for_job(job)({}, transforms.node_hooks(library))
    runner.activate(job)
    x = feed()
    capture = runner.infer(x)
    arrays = {f"infer/{k}": v for k, v in capture.arrays.items()}
    arrays["plain"] = runner.infer_plain(x)
    isolated = runner.isolate(x, fed if fed is not None else _nchw(capture))
    arrays.update({f"isolated/{k}": v for k, v in isolated.arrays.items()})
    layouts = {**capture.layouts, **{f"isolated/{k}": v for k, v in isolated.layouts.items()}}
    return {
        "arrays": arrays,
        "layouts": layouts,
        "settings": runner.describe_settings(),
        "fault": recorded_fault({TRANSFORMS_KEY: transforms.records()}),
        "fed": _nchw(capture),
    }


def main() -> int:
    library, export_dir, cases_path, out = sys.argv[1:5]
    out_dir = Path(out)
    job = ModelJob(load_export(Path(export_dir)), None)
    cases = json.loads(Path(cases_path).read_text())
    results: dict = {}
    clean = _run(library, job, Transforms(), None)
    fed = clean["fed"]
    runs = [("clean", None)] + [(c["name"], c["fault"]) for c in cases]
    runs.append(("clean_after", None))
    for name, fault in runs:
        try:
            transforms = _transforms(library, job.export, fault, out_dir / "models" / name)
            result = clean if name == "clean" else _run(library, job, transforms, fed)
        except Exception as err:  # recorded; the test decides whether it was expected
            results[name] = {
                "error": f"{err.__class__.__name__}: {err}",
                "traceback": traceback.format_exc()[-3000:],
            }
            continue
        np.savez(out_dir / f"{name}.npz", **result["arrays"])
        results[name] = {
            "settings": result["settings"],
            "fault": result["fault"],
            "layouts": result["layouts"],
        }
    (out_dir / "results.json").write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
