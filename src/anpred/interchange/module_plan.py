"""The anchor plan of a user's torch module, from its module tree.

``stage``: the module's top-level children, where a child that is a bare container
(``nn.Sequential``, ``nn.ModuleList``) stands for its own children -- torchvision's
``features`` of EfficientNet gives ``features.0`` .. ``features.8``, not one anchor.
``layer``: the children of each stage anchor (a stage anchor without children stays).

One forward pass on the example inputs keeps the candidates that make sense as anchors,
in the order they run: called exactly once, returning at least one tensor, not returning
its own input (an eval-mode ``Dropout``, an ``Identity``) and not returning a tensor an
earlier anchor or the model's output already is (a last ``fc`` returns the output). The
final output is the ``output`` anchor, as for every model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from anpred.errors import UsageError
from anpred.interchange.anchored import call_model, flatten_tensors
from anpred.zoo.plans import with_output
from anpred.zoo.spec import Anchor


def _children(module: Any, path: str) -> list[tuple[str, Any]]:
    prefix = f"{path}." if path else ""
    return [(f"{prefix}{name}", child) for name, child in module.named_children()]


def _stage_candidates(model: Any) -> list[tuple[str, Any]]:
    import torch

    containers = (torch.nn.Sequential, torch.nn.ModuleList)
    found = []
    for path, child in _children(model, ""):
        inner = _children(child, path)
        found += inner if isinstance(child, containers) and inner else [(path, child)]
    return found


def candidates(model: Any, granularity: str) -> list[str]:
    """Module paths that may become anchors at ``granularity`` (before the forward check)."""
    stage = _stage_candidates(model)
    if granularity == "stage":
        return [path for path, _ in stage]
    return [p for path, child in stage for p, _ in (_children(child, path) or [(path, child)])]


def module_plan(
    model: Any, granularity: str, inputs: Sequence[Any], keywords: Sequence[str] = ()
) -> list[Anchor]:
    """The anchors of ``model`` at ``granularity`` (see the module docstring).

    Args:
        model: The module (eval mode).
        granularity: ``stage`` or ``layer``.
        inputs: Example input tensors, in call order.
        keywords: Their names when the module takes them by name.

    Raises:
        UsageError: The module fails on its example inputs.
    """
    import torch

    modules = dict(model.named_modules())
    # a module registered under two paths is one module, named by its first path
    paths = [path for path in candidates(model, granularity) if path in modules]
    calls: dict[str, int] = {}
    outputs: dict[str, list[Any]] = {}
    order: list[str] = []
    passing: set[str] = set()  # modules that returned their own input

    def hook(path: str) -> Any:
        def record(_module: Any, given: Any, output: Any) -> None:
            calls[path] = calls.get(path, 0) + 1
            outputs[path] = flatten_tensors(output)
            if {id(t) for t in outputs[path]} & {id(t) for t in flatten_tensors(given)}:
                passing.add(path)
            if path not in order:
                order.append(path)

        return record

    handles = [modules[p].register_forward_hook(hook(p)) for p in paths]
    try:
        with torch.no_grad():
            output = call_model(model, inputs, keywords)
    except Exception as err:
        text = " ".join(str(err).split())[:300]
        raise UsageError(
            f"the module fails on its example inputs: {err.__class__.__name__}: {text}"
        ) from None
    finally:
        for handle in handles:
            handle.remove()
    seen = {id(t) for t in flatten_tensors(output)}
    anchors = []
    for path in order:
        tensors = outputs[path]
        repeated = path in passing or any(id(t) in seen for t in tensors)
        if calls[path] != 1 or not tensors or repeated:
            continue
        seen.update(id(t) for t in tensors)
        anchors.append(Anchor(path, path, path.split(".")[0]))
    return with_output(anchors)
