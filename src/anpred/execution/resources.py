"""Resources of a run: its memory budget, estimated before anything large is allocated and
refused beyond it, and the disk its captures need.

A model file may declare any input shape (``1x3x100000x100000`` is 120 GB of float32):
anpred must say so in one line instead of allocating until the kernel kills it. The
estimate is made from the anchored export's shapes, before the inputs are prepared, and
counts the three peaks of a run:

- *inputs*: the preprocessed inputs held together (float32) plus one image being
  preprocessed (uint8 pixels, a float copy);
- *workers*: ``parallel`` workers at once, but no more than there are participants and the
  fp64 reference (one worker each), each holding the model's weights twice (file and
  runtime copy), the input, and every anchor of one input; the fp64 reference, which runs
  beside them, holds them in float64;
- *analysis*: one anchor of every participant in float64, plus the consensus, the fp64
  reference and temporaries (the streaming pass in :mod:`anpred.pipeline.evidence`), in
  each of up to ``parallel`` processes, and never more than inputs
  (:mod:`anpred.pipeline.collect_pool`).

It is a floor, not a bound: libraries add workspace of their own. Workers additionally run
under the same budget (:mod:`anpred.execution.memory`), so what the estimate misses is a
recorded symptom of the participant that exceeded it.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from anpred.errors import UsageError

_UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}


def parse_size(text: str) -> int:
    """Parse ``512M``, ``8G``, ``8GB``, ``1.5G`` or a byte count.

    Raises:
        UsageError: Not a size.
    """
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]+)?)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if not match:
        raise UsageError(f"--max-memory: {text!r} is not a size (e.g. 512M, 8G)")
    value = float(match.group(1)) * _UNITS[match.group(2).upper()]
    if value < 1:
        raise UsageError(f"--max-memory must be positive, got {text!r}")
    return int(value)


def format_size(n: float) -> str:
    """``1.5 GB``-style text."""
    for unit, scale in (("TB", 2**40), ("GB", 2**30), ("MB", 2**20), ("KB", 2**10)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{int(n)} B"


def available_memory(meminfo: str | None = None) -> int | None:
    """Bytes the kernel says can be allocated now without swapping (``MemAvailable``)."""
    if meminfo is None:
        try:
            meminfo = Path("/proc/meminfo").read_text()
        except OSError:
            return None
    for line in meminfo.splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return None


#: Share of the available memory a run may use by default (the rest stays for the system).
DEFAULT_SHARE = 0.8


def default_budget() -> int | None:
    """The default budget: 80 % of the memory available now (``None`` where unknown)."""
    available = available_memory()
    return int(available * DEFAULT_SHARE) if available else None


@dataclass(frozen=True)
class MemoryEstimate:
    """Estimated peak bytes of a run's phases; :attr:`peak` is the largest."""

    inputs: int
    workers: int
    analysis: int

    @property
    def peak(self) -> int:
        """The largest phase."""
        return max(self.inputs, self.workers, self.analysis)

    @property
    def phase(self) -> str:
        """Name of the largest phase."""
        return max(("inputs", "workers", "analysis"), key=lambda k: getattr(self, k))


def _numel(shape: Sequence[int]) -> int:
    return math.prod(max(1, int(d)) for d in shape)


def estimate_memory(
    input_shape: Sequence[int],
    anchor_shapes: Sequence[Sequence[int]],
    n_inputs: int,
    n_participants: int,
    parallel: int,
    model_bytes: int,
) -> MemoryEstimate:
    """Estimate a run's peaks (see the module docstring for what each counts).

    Args:
        input_shape: The model's input shape.
        anchor_shapes: Every anchor's shape (final output included).
        n_inputs: Number of inputs.
        n_participants: Participants besides the fp64 reference.
        parallel: Workers (at most one per participant and the fp64 reference) and
            analysis processes running at once.
        model_bytes: Size of the model's weights on disk.
    """
    x = _numel(input_shape)
    anchors = [_numel(s) for s in anchor_shapes] or [x]
    inputs = 4 * x * n_inputs + (1 + 4 + 8) * x
    worker32 = 2 * model_bytes + 4 * x + 4 * sum(anchors) * 2
    worker64 = 4 * model_bytes + 8 * x + 8 * sum(anchors) * 2
    at_once = max(1, min(parallel, n_participants + 1))  # one worker per participant
    workers = worker64 + (at_once - 1) * worker32  # the fp64 reference runs beside them
    # the analysis forks at most one process per input (pipeline/collect_pool.py)
    analysis = max(1, min(parallel, n_inputs)) * 8 * max(anchors) * (n_participants + 6)
    return MemoryEstimate(inputs, workers, analysis)


def estimate_disk(
    input_shape: Sequence[int],
    anchor_shapes: Sequence[Sequence[int]],
    n_inputs: int,
    at_once: int,
    n_participants: int,
    isolation: bool,
) -> int:
    """Bytes of disk a run writes at its peak (a floor: captures and inputs, no metadata).

    Every fp32 participant writes each input's anchors in float32, once anchored and, with
    stage isolation, once isolated; the fp64 reference writes them in float64. ``at_once``
    inputs' captures are on disk together (a run in chunks: a chunk's; in one go: all), the
    preprocessed inputs (float32) all along. yolov8n, stage anchors (4.6 M values per
    input), six libraries: 250 MB (2**20 bytes) per input, against 263 MB measured (8
    inputs: 2105 MB of captures).

    Args:
        input_shape: The model's input shape.
        anchor_shapes: Every anchor's shape (final output included).
        n_inputs: Number of inputs.
        at_once: Inputs whose captures are on disk together.
        n_participants: fp32 participants (the fp64 reference is counted besides).
        isolation: Whether stage isolation writes a second capture per participant.
    """
    values = sum(_numel(s) for s in anchor_shapes)
    per_input = values * (4 * n_participants * (2 if isolation else 1) + 8)
    return per_input * max(0, min(at_once, n_inputs)) + 4 * _numel(input_shape) * n_inputs


def check_disk(need: int, folder: Path, what: str) -> None:
    """Refuse a run whose disk floor ``need`` exceeds the free space where ``folder`` is
    (or would be): better in one line now than every worker failing on a full disk later.

    Raises:
        UsageError: One line naming the need, the free space and what to do.
    """
    import shutil

    place = Path(folder).absolute()
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        free = shutil.disk_usage(place).free
    except OSError:
        return
    if need <= free:
        return
    raise UsageError(
        f"{what} would write at least {format_size(need)} to disk at its peak, and "
        f"{format_size(free)} is free in {place}; free some space, or use a smaller --chunk "
        "or fewer inputs"
    )


def check_budget(estimate: MemoryEstimate, budget: int | None, what: str) -> None:
    """Refuse a run whose estimate exceeds ``budget`` (``None``: no budget).

    Raises:
        UsageError: One line naming the estimate, its largest phase and the budget.
    """
    if budget is None or estimate.peak <= budget:
        return
    advice = (  # what lowers the phase that peaks
        "use fewer or smaller inputs"
        if estimate.phase == "inputs"
        else "use smaller inputs, fewer participants or a lower --parallel"
    )
    raise UsageError(
        f"{what} would need at least {format_size(estimate.peak)} of memory "
        f"({estimate.phase}), over the budget of {format_size(budget)}; "
        f"{advice}, or raise --max-memory"
    )
