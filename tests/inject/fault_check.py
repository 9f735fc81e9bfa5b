"""Run the fault chain in one library with a list of faults; save every capture.

``python fault_check.py LIBRARY EXPORT_DIR CASES.json OUT_DIR`` (run by the tests in a
subprocess, so that the test process imports no DL library and no two libraries share a
process). For the clean participant (before and after the faulty ones) and for every case
it writes ``OUT_DIR/<case>.npz`` with ``infer/<anchor>``, ``isolated/<anchor>`` (stage
isolation fed with the clean run's anchors) and ``plain`` (the plain graph's output), and
``OUT_DIR/results.json`` with each case's ``describe_settings()`` or its error.
"""

from __future__ import annotations

import json
import sys
import traceback
from pathlib import Path

import numpy as np

from anpred.backends.base import Capture, ModelJob, Runner
from anpred.backends.registry import runner_class
from anpred.interchange.export import load_export

sys.path.insert(0, str(Path(__file__).parent))
from fault_chain import feed  # noqa: E402


def _nchw(capture: Capture) -> dict[str, np.ndarray]:
    """The capture in ONNX's layout (what stage isolation is fed with)."""
    return {
        k: v.transpose(0, 3, 1, 2) if capture.layouts.get(k) == "NHWC" else v
        for k, v in capture.arrays.items()
    }


def _runner(library: str, settings: dict) -> Runner:
    """The library's runner; ``torch`` means torch through its translators (what it runs
    for ONNX models), whatever the native torch runner does with zoo models."""
    if library != "torch":
        return runner_class(library)(settings)
    from anpred.backends.translated_runner import TranslatedRunner

    class TorchTranslatedRunner(TranslatedRunner):
        library = "torch"

    return TorchTranslatedRunner(settings)


def _run(library: str, job: ModelJob, settings: dict, fed: dict | None) -> dict:
    runner = _runner(library, settings)
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
        "fed": _nchw(capture),
    }


def main() -> int:
    library, export_dir, cases_path, out = sys.argv[1:5]
    out_dir = Path(out)
    job = ModelJob(load_export(Path(export_dir)), None)
    cases = json.loads(Path(cases_path).read_text())
    results: dict = {}
    clean = _run(library, job, {}, None)
    fed = clean["fed"]
    runs = [("clean", {})] + [(c["name"], {"fault": c["fault"]}) for c in cases]
    runs.append(("clean_after", {}))
    for name, settings in runs:
        try:
            result = clean if name == "clean" else _run(library, job, settings, fed)
        except Exception as err:  # recorded; the test decides whether it was expected
            results[name] = {
                "error": f"{err.__class__.__name__}: {err}",
                "traceback": traceback.format_exc()[-3000:],
            }
            continue
        np.savez(out_dir / f"{name}.npz", **result["arrays"])
        results[name] = {"settings": result["settings"], "layouts": result["layouts"]}
    (out_dir / "results.json").write_text(json.dumps(results, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
