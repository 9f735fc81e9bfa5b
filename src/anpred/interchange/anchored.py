"""A torch wrapper that returns the final output plus every anchor's tensor(s)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from anpred.errors import UsageError
from anpred.zoo.spec import OUTPUT_ANCHOR, Anchor


def flatten_tensors(value: Any) -> list[Any]:
    """Return the tensors inside a (nested) tuple/list/dict output, in order."""
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return [t for item in value for t in flatten_tensors(item)]
    return []


def anchor_keys(anchor: Anchor, count: int) -> list[str]:
    """Name the tensors of one anchor: ``name`` for one tensor, ``name:i`` for several."""
    return [anchor.name] if count == 1 else [f"{anchor.name}:{i}" for i in range(count)]


class AnchorRecorder:
    """Forward hooks that record the output of each anchor's module during one call.

    Args:
        model: The torch model.
        anchors: Anchors to record; the ``output`` anchor (module ``""``) is skipped here.

    Raises:
        UsageError: When an anchor names a module the model does not have.
    """

    def __init__(self, model: Any, anchors: Sequence[Anchor]) -> None:
        modules = dict(model.named_modules())
        self.anchors = [a for a in anchors if a.module]
        missing = [a.module for a in self.anchors if a.module not in modules]
        if missing:
            raise UsageError(
                f"anchor module(s) {', '.join(missing[:3])} not found in the model; "
                "name modules by their dotted path (e.g. model.4, layer2.1)"
            )
        self.records: dict[str, Any] = {}
        self.calls: dict[str, int] = {}
        self._handles = [
            modules[a.module].register_forward_hook(self._hook(a.name)) for a in self.anchors
        ]

    def _hook(self, name: str) -> Any:
        def record(_module: Any, _inputs: Any, output: Any) -> None:
            self.records[name] = output
            self.calls[name] = self.calls.get(name, 0) + 1

        return record

    def reset(self) -> None:
        """Forget what the previous call recorded."""
        self.records = {}
        self.calls = {}

    def remove(self) -> None:
        """Remove the hooks."""
        for handle in self._handles:
            handle.remove()

    def captured(self, output: Any) -> dict[str, Any]:
        """Return {anchor key: tensor} for the last call, final output last."""
        result: dict[str, Any] = {}
        for anchor in self.anchors:
            tensors = flatten_tensors(self.records.get(anchor.name))
            result.update(zip(anchor_keys(anchor, len(tensors)), tensors, strict=True))
        result[OUTPUT_ANCHOR] = final_output(output)
        return result


def final_output(output: Any) -> Any:
    """The model's final output: its first tensor (YOLO's decoded predictions, logits)."""
    tensors = flatten_tensors(output)
    if not tensors:
        raise UsageError("the model returned no tensor")
    return tensors[0]


def call_model(model: Any, inputs: Sequence[Any], keywords: Sequence[str] = ()) -> Any:
    """Call ``model`` on its inputs: positionally, or by name when ``keywords`` names them."""
    if keywords:
        return model(**dict(zip(keywords, inputs, strict=True)))
    return model(*inputs)


def anchored_module(model: Any, anchors: Sequence[Anchor], keywords: Sequence[str] = ()) -> Any:
    """Wrap ``model`` so that its forward returns (output, *anchor tensors).

    The wrapper takes the model's inputs positionally; ``keywords`` names them when the
    model takes them by name (a user's module called with a dict of example inputs).
    """
    import torch

    class Anchored(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model
            self.recorder = AnchorRecorder(model, anchors)
            self.keys: list[str] = []

        def forward(self, *inputs: Any) -> tuple[Any, ...]:
            self.recorder.reset()
            captured = self.recorder.captured(call_model(self.model, inputs, keywords))
            output = captured.pop(OUTPUT_ANCHOR)
            self.keys = [OUTPUT_ANCHOR, *captured]
            return (output, *captured.values())

    return Anchored()


class PlainOutput:
    """Wrap ``model`` so that its forward returns only the final output (no anchors)."""

    def __new__(cls, model: Any, keywords: Sequence[str] = ()) -> Any:  # noqa: D102
        import torch

        class Plain(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.model = model

            def forward(self, *inputs: Any) -> Any:
                return final_output(call_model(self.model, inputs, keywords))

        return Plain()
