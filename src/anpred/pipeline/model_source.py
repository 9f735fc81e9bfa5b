"""What kind of model a run names (zoo model, ONNX file, torch module), checked up front."""

from __future__ import annotations

from pathlib import Path

from anpred.errors import UsageError
from anpred.interchange.user_module import check_module_source, is_module_source, is_onnx_path
from anpred.settings import RunOptions


def check_model(options: RunOptions) -> tuple[str | None, int | None]:
    """Check the run's model before anything is written; return how its image inputs are
    preprocessed and their side (a zoo model's; ``(None, None)`` for an ONNX file or a
    module, whose inputs follow their export).

    Raises:
        UsageError: An unknown zoo model, a bad input size, an unreadable ONNX file or
            module source, ``--weights`` with a module.
    """
    if is_module_source(options.model):
        check_module_source(options.model)
        if options.weights is not None:
            raise UsageError("--weights applies to zoo models: load a checkpoint in your module")
        return None, None
    if not is_onnx_path(options.model):
        from anpred.zoo.registry import get_model

        spec = get_model(options.model)
        size = options.input_size or spec.input_size
        if size % 32:
            raise UsageError(f"--input-size must be a multiple of 32, got {size}")
        return spec.preprocessing, size
    from anpred.pipeline.user_onnx import load_onnx

    load_onnx(Path(options.model))
    return None, None
