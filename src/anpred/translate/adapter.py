"""The per-library half of the ONNX interpreter: how values enter and leave a library."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

import numpy as np


class LibraryAdapter(ABC):
    """Everything the generic interpreter needs from one library, besides op translators.

    Concrete adapters live next to their translators (``translate/tf_ops.py`` ...) and
    are created inside the worker process, so this module imports no DL library.
    """

    #: Library name; the key of this library's translators in the registry.
    name: str = ""

    @abstractmethod
    def const(self, array: np.ndarray) -> Any:
        """Turn a constant (initializer, folded value) into a library tensor."""

    @abstractmethod
    def feed(self, array: np.ndarray) -> Any:
        """Turn a graph input (NCHW numpy array) into a library tensor."""

    @abstractmethod
    def to_numpy(self, value: Any) -> np.ndarray:
        """Return ``value`` as a numpy array, in the layout :meth:`layout` reports."""

    def restore_dtype(self, array: np.ndarray, dtype: np.dtype | None) -> np.ndarray:
        """Return an output ``array`` in the ONNX dtype ``dtype`` where the library narrowed it.

        Called on arrays that left the library (:meth:`to_numpy`). The default returns
        ``array`` unchanged; an adapter whose library cannot hold an ONNX type (jax without
        ``jax_enable_x64`` has no int64) widens it back, exactly, so results keep ONNX's
        output dtypes.
        """
        return array

    def layout(self, value: Any) -> str:
        """Return the layout of ``value`` (``"NCHW"`` when it is the ONNX layout)."""
        return "NCHW"

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Wrap the whole-graph function (e.g. ``jax.jit``); identity by default.

        The function takes ``(consts: dict[str, tensor], *feeds)``; constants are passed
        as an argument so that compilers do not bake the weights into the program.
        """
        return fn

    def cast(self, value: Any, dtype: str) -> Any:
        """Cast a library tensor to a numpy dtype name (used by fault injection)."""
        raise NotImplementedError(f"{self.name} adapter does not cast")

    def settings(self) -> dict[str, Any]:
        """Return the settings this adapter runs with (recorded in results)."""
        return {}
