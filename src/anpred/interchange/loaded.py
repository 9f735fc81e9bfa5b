"""ONNX graphs loaded once per process: a campaign plans every fault of a model on the same
export, and each plan read (and shape-inferred) the same files again.

:func:`load_shared` returns one :class:`onnx.ModelProto` per file version (path,
modification time, size) while it is among the last few loaded; :func:`facts_of` keeps what
a function derives from such a model (its inferred value types, its node stages) for as long
as the model object is held. Callers must not modify a shared model (copy it first, as
:func:`anpred.inject.onnx_rewrite.rewrite_model` does).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Hashable
from typing import Any, TypeVar

import onnx

T = TypeVar("T")

#: Models kept (the anchored and plain graphs of the model at hand).
KEPT = 2

_loaded: list[tuple[tuple[str, int, int], onnx.ModelProto]] = []
_facts: list[tuple[onnx.ModelProto, Hashable, Any]] = []


def load_shared(path: str | os.PathLike[str]) -> onnx.ModelProto:
    """The ONNX model at ``path``, loaded once per file version (do not modify it)."""
    stat = os.stat(path)
    key = (os.path.realpath(path), stat.st_mtime_ns, stat.st_size)
    for held, model in _loaded:
        if held == key:
            return model
    model = onnx.load(str(path))
    _loaded.insert(0, (key, model))
    del _loaded[KEPT:]
    return model


def facts_of(model: onnx.ModelProto, what: Hashable, derive: Callable[[], T]) -> T:
    """``derive()``, computed once per (``model`` object, ``what``) while the model is one
    of the last few asked about (the object is held: its identity cannot be reused), for a
    model :func:`load_shared` gave (which nobody modifies); for any other, every time (a
    model its owner may change in place, e.g. a reproducer being reduced).
    """
    if not any(shared is model for _, shared in _loaded):
        return derive()
    for held, key, value in _facts:
        if held is model and key == what:
            return value  # type: ignore[no-any-return]
    value = derive()
    _facts.insert(0, (model, what, value))
    del _facts[4 * KEPT :]
    return value
