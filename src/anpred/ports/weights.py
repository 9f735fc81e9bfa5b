"""Does a port hold the reference's weights? Its parameters against the module's, in order.

A port whose weights were transferred wrong differs from the reference at the first anchor
after the wrong weight, by far more than rounding: the oracle flags it like any numerical
difference. This check says which it is. The port's trainable parameters and the
reference module's parameters (``module_parameters.npz``, written by the export) are
paired in order; a pair compares when one array is the other up to a transpose (paddle's
``Linear`` holds ``[in, out]``, Keras' ``Conv2D`` ``HWIO``). A pair whose largest
difference exceeds :data:`TOLERANCE` of the reference's largest magnitude is reported.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from anpred.interchange.user_module import PARAMETERS_FILE

#: Relative difference above which a transferred weight counts as different: float32
#: holds a transferred value exactly, so any difference is a transfer error (1e-6 leaves
#: room for weights the user computed, e.g. folded BatchNorm).
TOLERANCE = 1e-6


def _aligned(port: np.ndarray, reference: np.ndarray) -> np.ndarray | None:
    """``port`` with its axes in the reference's order, or ``None`` when no order fits."""
    if port.shape == reference.shape:
        return port
    if port.size != reference.size or port.ndim != reference.ndim or port.ndim > 5:
        return None
    for order in itertools.permutations(range(port.ndim)):
        if tuple(port.shape[i] for i in order) == reference.shape:
            return port.transpose(order)
    return None


def compare_weights(port: Sequence[tuple[str, np.ndarray]], folder: Path) -> dict[str, Any]:
    """Compare a port's trainable parameters with the reference module's, in order.

    Args:
        port: ``(name, array)`` of the port's trainable parameters, in the port's order.
        folder: The export folder (holds ``module_parameters.npz``).

    Returns:
        ``compared`` (pairs), ``differ`` (``port``, ``reference``, ``max_abs_diff``, in
        order: the first is where the transfer went wrong first) and ``unpaired`` (names
        without a partner of the same size), or ``{}`` when the reference has no record.
    """
    path = folder / PARAMETERS_FILE
    if not path.is_file():
        return {}
    with np.load(path) as data:
        reference = [(name, data[name]) for name in data.files]
    differ, unpaired, compared = [], [], 0
    for (port_name, value), (ref_name, ref) in zip(port, reference, strict=False):
        aligned = _aligned(np.asarray(value), ref)
        if aligned is None:
            unpaired.append(port_name)
            continue
        compared += 1
        diff = float(np.max(np.abs(aligned.astype(np.float64) - ref))) if ref.size else 0.0
        if diff > TOLERANCE * max(float(np.max(np.abs(ref))) if ref.size else 0.0, 1e-30):
            differ.append({"port": port_name, "reference": ref_name, "max_abs_diff": diff})
    if len(port) != len(reference):
        unpaired.append(f"{len(port)} port vs {len(reference)} reference parameters")
    return {"compared": compared, "differ": differ, "unpaired": unpaired}
