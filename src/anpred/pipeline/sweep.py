"""``anpred sweep``: the same analysis at several input sizes (dimension sensitivity).

Each size is a full ``anpred run`` in ``DIR/size-<N>`` (resumable); the sweep then fits,
per participant and anchor, how the deviation from fp64 changes with the input size
(slope of log error vs log size, monotonic or not) and writes ``DIR/sweep.json``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from anpred.errors import UsageError
from anpred.interchange.user_module import is_module_source, is_onnx_path
from anpred.localization.sweep import sweep_by_anchor
from anpred.pipeline.run import run
from anpred.settings import ExecutionSettings, RunOptions
from anpred.store import SweepStore
from anpred.store.summary import Summary
from anpred.zoo.registry import get_model, model_names


def sweep(
    options: RunOptions,
    sizes: Sequence[int],
    out: Path,
    settings: ExecutionSettings | None = None,
) -> dict[str, Any]:
    """Run ``options`` at every size and summarise the error's dependence on size.

    ``settings`` say how each run executes (default: ``anpred run``'s defaults).
    """
    if settings is None:
        settings = ExecutionSettings()
    say = settings.say
    if is_onnx_path(options.model) or is_module_source(options.model):
        raise UsageError(
            "sweep needs a zoo model (an ONNX file or a module has a fixed input size)"
        )
    _refuse_fixed_size(options.model)
    if len(sizes) < 2:
        raise UsageError("--sizes needs at least two sizes, e.g. 320,480,640")
    store = SweepStore(out)
    store.root.mkdir(parents=True, exist_ok=True)
    per_size: dict[int, Summary] = {}
    for size in sizes:
        say(f"== input size {size}")
        outcome = run(replace(options, input_size=size), store.size_run(size), settings)
        per_size[size] = outcome.summary
    first = per_size[sizes[0]]
    anchors = first.anchor_keys
    result: dict[str, Any] = {"model": options.model, "sizes": list(sizes), "participants": {}}
    for participant in first.deviation.vs_fp64:
        errors: dict[str, list[float]] = {}
        for anchor in anchors:
            values = [per_size[s].deviation.vs_fp64.get(participant, {}).get(anchor) for s in sizes]
            if all(v is not None for v in values):
                errors[anchor] = values
        fits = sweep_by_anchor(list(sizes), errors)
        result["participants"][participant] = {
            "errors": errors,
            "fits": {a: f.to_dict() for a, f in fits.items()},
        }
    store.write_result(result)
    return result


def _refuse_fixed_size(model: str) -> None:
    """A zoo model whose architecture fixes its input size cannot be swept."""
    if model in model_names() and not get_model(model).resizable:
        raise UsageError(f"sweep needs a resizable model; {model}'s input size is fixed")


def sweep_table(result: dict[str, Any]) -> str:
    """Plain-text table: participant × anchor → errors per size and trend."""
    sizes = result["sizes"]
    lines = [
        f"{'participant':<14}{'anchor':<16}"
        + "".join(f"{s:>11}" for s in sizes)
        + "  slope   trend"
    ]
    for participant, data in result["participants"].items():
        for anchor, values in data["errors"].items():
            fit = data["fits"][anchor]
            lines.append(
                f"{participant:<14}{anchor:<16}"
                + "".join(f"{v:11.2e}" for v in values)
                + f"  {fit['slope']:+.2f}  {fit['trend']}"
            )
    return "\n".join(lines)
