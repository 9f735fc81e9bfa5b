"""The model zoo registry: ``@register_model`` and lookups by name."""

from __future__ import annotations

from collections.abc import Callable

from anpred.errors import UsageError
from anpred.zoo.spec import ModelSpec

_MODELS: dict[str, ModelSpec] = {}


def register_model(spec: ModelSpec) -> ModelSpec:
    """Add ``spec`` to the zoo; a duplicate name is an error."""
    if spec.name in _MODELS:
        raise ValueError(f"duplicate zoo model {spec.name!r}")
    _MODELS[spec.name] = spec
    return spec


def _load_builtin() -> None:
    from anpred.zoo import torchvision_models, ultralytics_models  # noqa: F401

    # isort: split
    from anpred.zoo import transformer_models  # noqa: F401  (registered last: listing order)


def get_model(name: str) -> ModelSpec:
    """Return the zoo entry ``name``.

    Raises:
        UsageError: When no such model exists (the message lists the zoo).
    """
    _load_builtin()
    if name not in _MODELS:
        raise UsageError(
            f"unknown model {name!r}; choose one of {', '.join(sorted(_MODELS))} "
            "or give a path to an .onnx file"
        )
    return _MODELS[name]


def model_names() -> list[str]:
    """Return the zoo's model names in registration order."""
    _load_builtin()
    return list(_MODELS)


def builders() -> dict[str, Callable[[], object]]:
    """Return the builder of every zoo model by name."""
    _load_builtin()
    return {name: spec.build for name, spec in _MODELS.items()}


def module_source(model: str) -> str:
    """The module source a zoo model that takes no image runs from (a transformer), else
    ``model`` unchanged (an image model of the zoo, an ONNX path, a user's module).
    """
    _load_builtin()
    spec = _MODELS.get(model)
    return spec.module_source if spec is not None and spec.module_source else model
