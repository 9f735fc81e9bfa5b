"""The paddle :class:`~anpred.translate.adapter.LibraryAdapter` (CPU, dynamic graph, NCHW).

Importing this module imports paddle; only the paddle worker process does that.

Quiet import: paddle's C++ logging (glog) is set to warnings-and-above with
``GLOG_minloglevel=2`` unless the environment already chooses a level, and the
``No ccache found`` warning that ``paddle.utils.cpp_extension`` raises at import is
suppressed (it concerns compiling C++ extensions, which anpred never does).

Threads (measured with paddlepaddle 3.3.1 on CPU): dynamic-graph kernels run on one
thread by default. ``paddle.base.core.set_num_threads(n)`` changes that at run time (a
1024² matmul runs 1.9x faster with 2 threads on 2 cores), as does ``OMP_NUM_THREADS``
set before the import; ``paddle.set_flags({"FLAGS_paddle_num_threads": n})`` after the
import has no effect. ``FLAGS_use_onednn=True`` left a conv2d result bitwise unchanged in
dynamic mode, so it is not offered as a setting.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from anpred.errors import MissingLibraryError, UsageError
from anpred.translate.adapter import LibraryAdapter

_FLOAT_DTYPES = ("float32", "float64")


def import_paddle() -> Any:
    """Import paddle quietly and put it on CPU in dynamic-graph mode.

    Returns:
        The ``paddle`` module.

    Raises:
        MissingLibraryError: When paddlepaddle is not installed.
    """
    os.environ.setdefault("GLOG_minloglevel", "2")
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="No ccache found")
        try:
            import paddle
        except ImportError as error:
            raise MissingLibraryError("paddle", "paddle") from error
    paddle.disable_static()
    paddle.set_device("cpu")
    return paddle


class PaddleAdapter(LibraryAdapter):
    """Moves values in and out of paddle and runs graphs under the chosen float dtype.

    Args:
        dtype: Float dtype of the whole graph. ``"float32"`` (default) casts floating
            constants and feeds to float32; ``"float64"`` casts them to float64 and makes
            float64 paddle's default dtype while the graph runs, so that ``Cast`` to
            FLOAT, ``ConstantOfShape`` and ``Range`` stay in float64 too.
        threads: Number of CPU threads for paddle's kernels (``None``: paddle's default,
            one thread in dynamic mode).

    Raises:
        UsageError: On an unsupported dtype or thread count.
    """

    name = "paddle"

    def __init__(self, dtype: str = "float32", threads: int | None = None) -> None:
        if dtype not in _FLOAT_DTYPES:
            raise UsageError(f"paddle dtype must be one of {_FLOAT_DTYPES}, got {dtype!r}")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise UsageError(f"paddle threads must be a positive integer, got {threads!r}")
        self._paddle = import_paddle()
        self.dtype = dtype
        self.threads = threads
        if threads is not None:
            self._paddle.base.core.set_num_threads(threads)

    def _convert(self, array: np.ndarray) -> Any:
        array = np.asarray(array)
        if np.issubdtype(array.dtype, np.floating):
            array = array.astype(self.dtype, copy=False)
        return self._paddle.to_tensor(array, place=self._paddle.CPUPlace(), stop_gradient=True)

    def const(self, array: np.ndarray) -> Any:
        """Return a paddle CPU tensor; floating arrays are cast to the graph's dtype."""
        return self._convert(array)

    def feed(self, array: np.ndarray) -> Any:
        """Return a paddle CPU tensor (NCHW); floating arrays are cast to the graph's dtype."""
        return self._convert(array)

    def to_numpy(self, value: Any) -> np.ndarray:
        """Return ``value`` as numpy (bfloat16 comes back as float32)."""
        if value.dtype == self._paddle.bfloat16:
            value = value.astype("float32")
        return np.asarray(value.numpy())

    def compile(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        """Run ``fn`` eagerly without autograd, with the graph's dtype as paddle's default."""
        paddle = self._paddle

        def run(consts: dict[str, Any], *feeds: Any) -> Any:
            previous = paddle.get_default_dtype()
            paddle.set_default_dtype(self.dtype)
            try:
                with paddle.no_grad():
                    return fn(consts, *feeds)
            finally:
                paddle.set_default_dtype(previous)

        return run

    def cast(self, value: Any, dtype: str) -> Any:
        """Cast a paddle tensor to ``dtype`` (a numpy dtype name or ``"bfloat16"``)."""
        return self._paddle.cast(value, dtype)

    def settings(self) -> dict[str, Any]:
        """Return the dtype, thread count, device, mode and paddle version."""
        return {
            "dtype": self.dtype,
            "threads": self.threads,
            "device": "cpu",
            "mode": "dynamic",
            "paddle": self._paddle.__version__,
        }
