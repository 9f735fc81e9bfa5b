"""``python -m anpred.pipeline.prepare REQUEST.json``: prepare the anchored model in a worker.

A zoo model is exported with torch; a user's ONNX file gets its anchors added.

Prints the export as JSON on its last stdout line. Errors an anpred user can act on are
printed as ``ANPRED-ERROR: <message>`` and exit with code 2.
"""

from __future__ import annotations

import json
import sys
import warnings

from anpred.errors import AnpredError


def main(argv: list[str] | None = None) -> int:
    """Export the requested model (cached) and print the export record."""
    args = sys.argv[1:] if argv is None else argv
    request = json.loads(open(args[0]).read())
    warnings.simplefilter("ignore")
    try:
        if request.get("onnx"):
            from pathlib import Path

            from anpred.pipeline.user_onnx import anchored_user_export

            export = anchored_user_export(
                Path(request["onnx"]), Path(request["folder"]), request.get("anchors") or ()
            )
            print(json.dumps(export.to_dict()), flush=True)
            return 0
        from anpred.interchange.export import export_zoo_model

        export = export_zoo_model(
            request["model"],
            request.get("granularity", "stage"),
            request.get("weights"),
            int(request.get("seed", 0)),
            request.get("anchors") or (),
            input_size=request.get("input_size"),
        )
    except AnpredError as err:
        print(f"ANPRED-ERROR: {err}", flush=True)
        return 2
    print(json.dumps(export.to_dict()), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
