"""Registry of runners by library name; backend modules are imported on demand only."""

from __future__ import annotations

import importlib
from collections.abc import Callable

from anpred.backends.base import Runner

_RUNNERS: dict[str, type[Runner]] = {}

#: Library → module that defines its runner (imported only inside worker processes).
RUNNER_MODULES = {
    "torch": "anpred.backends.torch_runner",
    "onnxruntime": "anpred.backends.onnxruntime_runner",
    "openvino": "anpred.backends.openvino_runner",
    "tensorflow": "anpred.backends.translated_runner",
    "jax": "anpred.backends.translated_runner",
    "paddle": "anpred.backends.translated_runner",
}


def register_runner(library: str) -> Callable[[type[Runner]], type[Runner]]:
    """Register a runner class for ``library``; duplicates are an error."""

    def decorate(cls: type[Runner]) -> type[Runner]:
        if library in _RUNNERS:
            raise ValueError(f"duplicate runner for {library}")
        _RUNNERS[library] = cls
        return cls

    return decorate


def runner_class(library: str) -> type[Runner]:
    """Import the backend module of ``library`` and return its runner class."""
    importlib.import_module(RUNNER_MODULES[library])
    return _RUNNERS[library]
