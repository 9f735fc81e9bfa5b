"""An anchored model for an older ONNX loader: its IR version lowered to the one it reads.

anpred writes its ONNX files with the ``onnx`` of its environment (IR version 14 with onnx
1.23). An older release of a library run as a participant (``onnxruntime@1.17.3``,
:mod:`anpred.library.versions`) refuses them by their IR version alone: onnxruntime 1.17.3
says ``Unsupported model IR version: 14, max supported IR version: 9``. The IR version
only tells which file-format features a model may use; anpred's models use none newer than
IR 8 (operator sets 17 and 18, float types up to float64), so the same graph with the IR
version the loader names is the same model to it.
"""

from __future__ import annotations

import re

import onnx

_REFUSED = re.compile(r"Unsupported model IR version: (\d+), max supported IR version: (\d+)")
#: The lowest IR version that holds operator set 17/18 imports (IR 8, onnx 1.10+).
LOWEST_IR = 8


def lowered_ir(model: str | bytes, refusal: str) -> bytes | None:
    """``model`` (a path or serialized bytes) serialized with the IR version ``refusal``
    (a loader's error message) names as its highest, or ``None`` when ``refusal`` is not
    about the IR version or that version is too low for the model's operator sets.
    """
    found = _REFUSED.search(refusal)
    if found is None:
        return None
    highest = int(found.group(2))
    if highest < LOWEST_IR:
        return None
    proto = onnx.load(model) if isinstance(model, str) else onnx.load_from_string(model)
    proto.ir_version = min(proto.ir_version, highest)
    return proto.SerializeToString()
