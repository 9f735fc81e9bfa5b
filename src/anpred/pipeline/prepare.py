"""``python -m anpred.pipeline.prepare JOB.json``: the export job, in its own process.

A zoo model is exported with torch (cached), a user's torch module likewise (into the run
directory); a user's ONNX file gets its anchors added.
The job runs like a participant's worker (:mod:`anpred.execution.pool` starts it, with a
timeout): it keeps its ``status`` record in the job's folder up to date (state, step), and
finishes with ``state: ok`` and the export record under ``export``, or ``state: error`` and
the message -- ``usage_error`` when an anpred user can act on it (exit code 2).
"""

from __future__ import annotations

import os
import signal
import sys
import traceback
import warnings
from pathlib import Path
from typing import Any

from anpred.errors import AnpredError
from anpred.execution.memory import die_with_parent, start_watchdog
from anpred.store import ParticipantStore, Status, Step


def _export(request: dict[str, Any]) -> dict[str, Any]:
    """Run the export the request names; return its record."""
    if request.get("onnx"):
        from anpred.interchange.input_shapes import parse_input_shapes
        from anpred.pipeline.user_onnx import anchored_user_export

        record = request.get("folding_record")
        export = anchored_user_export(
            Path(request["onnx"]),
            Path(request["folder"]),
            request.get("anchors") or (),
            parse_input_shapes(request.get("input_shapes") or ()),
            request.get("image_size"),
            Path(record) if record else None,
            request.get("stages"),
            request.get("granularity") or "stage",
            Path(packing) if (packing := request.get("packing_record")) else None,
        )
        return export.to_dict()
    if request.get("module"):
        from anpred.interchange.input_shapes import parse_input_shapes
        from anpred.interchange.module_export import export_user_module

        export = export_user_module(
            request["module"],
            Path(request["folder"]),
            request.get("granularity") or "stage",
            request.get("anchors") or (),
            int(request.get("seed", 0)),
            parse_input_shapes(request.get("input_shapes") or ()),
            Path(packing) if (packing := request.get("packing_record")) else None,
            folding_record=Path(folding) if (folding := request.get("folding_record")) else None,
        )
        return export.to_dict()
    from anpred.interchange.export import export_zoo_model

    export = export_zoo_model(
        request["model"],
        request.get("granularity", "stage"),
        request.get("weights"),
        int(request.get("seed", 0)),
        request.get("anchors") or (),
        input_size=request.get("input_size"),
    )
    return export.to_dict()


def main(argv: list[str] | None = None) -> int:
    """Export the requested model (cached) and record the export in the job's status."""
    args = sys.argv[1:] if argv is None else argv
    request = ParticipantStore.load_job(Path(args[0]))
    folder = ParticipantStore(Path(request["out"])).create()
    status: dict[str, Any] = {"state": Status.RUNNING, "step": Step.LOAD, "pid": os.getpid()}
    folder.write_status(status)
    die_with_parent()

    def out_of_memory(used: int, limit: int) -> None:
        from anpred.execution.resources import format_size

        try:
            folder.write_status(
                {**status, "killed_for": f"out of memory: used {format_size(used)}, over the "
                 f"limit of {format_size(limit)} (--max-memory)"}
            )
        finally:
            os.kill(os.getpid(), signal.SIGKILL)

    start_watchdog(out_of_memory)
    warnings.simplefilter("ignore")
    try:
        status["step"] = Step.EXPORT
        folder.write_status(status)
        record = _export(request)
    except Exception as err:  # recorded for the parent, which reports it in one line
        usage = isinstance(err, AnpredError)
        status.update(
            state=Status.ERROR,
            message=str(err) if usage else f"{err.__class__.__name__}: {err}"[:2000],
            error_type=err.__class__.__name__,
            usage_error=usage,
            traceback=traceback.format_exc()[-4000:],
        )
        folder.write_status(status)
        return 2 if usage else 1
    folder.write_status({**status, "state": Status.OK, "step": Step.DONE, "export": record})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
