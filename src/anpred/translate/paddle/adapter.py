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

Precision configurations (measured, paddlepaddle 3.3.1, CPU): ``paddle.amp.auto_cast``
(O1 or O2, bfloat16 or float16) has no effect on CPU — paddle warns "amp_guard can only be
enabled on CUDAPlace, XPUPlace, and CustomPlace" and conv2d/matmul stay float32 — and
conv2d has no bfloat16 CPU kernel, so there is no paddle bf16 mode. ``static=True`` runs
the graph as a static ``paddle.static.Program`` (PIR) through ``paddle.static.Executor``;
on yolov8n its anchors equal the dynamic graph's bitwise (same CPU kernels).
``paddle.jit.to_static`` cannot convert the interpreter (SOT fails on ``NodeCall.attr``,
the AST mode on ``zip(strict=True)``), so the Program is built by running the translators
once on ``paddle.static.data`` placeholders instead.
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from anpred.errors import MissingLibraryError, UsageError
from anpred.translate.adapter import LibraryAdapter
from anpred.translate.process_env import check_process_env

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
        static: Run each graph as a static Program through paddle's Executor instead of
            op by op in dynamic mode.
        env: Environment variables the worker was started with (checked, recorded).

    Raises:
        UsageError: On an unsupported dtype or thread count, or a missing ``env`` variable.
    """

    name = "paddle"

    def __init__(
        self,
        dtype: str = "float32",
        threads: int | None = None,
        static: bool = False,
        env: dict[str, Any] | None = None,
    ) -> None:
        if dtype not in _FLOAT_DTYPES:
            raise UsageError(f"paddle dtype must be one of {_FLOAT_DTYPES}, got {dtype!r}")
        if threads is not None and (not isinstance(threads, int) or threads < 1):
            raise UsageError(f"paddle threads must be a positive integer, got {threads!r}")
        self.env = check_process_env("paddle", env)
        self._paddle = import_paddle()
        self.dtype = dtype
        self.threads = threads
        self.static = bool(static)
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
        """Run ``fn`` eagerly without autograd, with the graph's dtype as paddle's default.

        With ``static``, ``fn`` is instead built once into a static Program (see
        :class:`StaticGraph`).
        """
        paddle = self._paddle
        if self.static:
            return StaticGraph(paddle, fn, self.dtype)

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
            "mode": "static" if self.static else "dynamic",
            "executor": "paddle.static.Executor" if self.static else "eager",
            "paddle": self._paddle.__version__,
            "env": dict(self.env),
        }


class StaticGraph:
    """``fn(consts, *feeds)`` as a static paddle Program, built on the first call.

    Constants and feeds become ``paddle.static.data`` placeholders (so the Program holds
    no weights; the constants' values are read once, on the first call, and fed at every
    run); the translators run once on them to record the Program, which
    ``paddle.static.Executor`` then executes. Results come back as dynamic-mode tensors,
    like the eager path's.

    Args:
        paddle: The paddle module.
        fn: The whole-graph function.
        dtype: The graph's float dtype (paddle's default dtype while building).
    """

    def __init__(self, paddle: Any, fn: Callable[..., Any], dtype: str) -> None:
        self._paddle = paddle
        self._fn = fn
        self._dtype = dtype
        self._program: Any = None
        self._fetch: list[Any] = []
        self._consts: dict[str, np.ndarray] = {}
        self._executor = paddle.static.Executor(paddle.CPUPlace())

    @staticmethod
    def _placeholder(paddle: Any, name: str, tensor: Any) -> Any:
        dtype = str(tensor.dtype).replace("paddle.", "")
        return paddle.static.data(name, list(tensor.shape), dtype)

    def _build(self, consts: dict[str, Any], feeds: tuple[Any, ...]) -> None:
        paddle = self._paddle
        previous = paddle.get_default_dtype()
        paddle.enable_static()
        try:
            paddle.set_default_dtype(self._dtype)
            main, startup = paddle.static.Program(), paddle.static.Program()
            with paddle.static.program_guard(main, startup):
                names = {key: f"const{i}" for i, key in enumerate(consts)}
                const_vars = {k: self._placeholder(paddle, names[k], v) for k, v in consts.items()}
                feed_vars = [self._placeholder(paddle, f"feed{i}", f) for i, f in enumerate(feeds)]
                outputs = self._fn(const_vars, *feed_vars)
        finally:
            paddle.disable_static()
            paddle.set_default_dtype(previous)
        # ``startup`` stays empty: placeholders create no parameters to initialise.
        self._program = main
        self._fetch = list(outputs)
        self._consts = {names[k]: v.numpy() for k, v in consts.items()}

    def __call__(self, consts: dict[str, Any], *feeds: Any) -> tuple[Any, ...]:
        """Run the Program on ``feeds`` (building it first if needed); return the outputs."""
        paddle = self._paddle
        if self._program is None:
            self._build(consts, feeds)
        feed = dict(self._consts)
        feed.update({f"feed{i}": f.numpy() for i, f in enumerate(feeds)})
        paddle.enable_static()
        try:
            values = self._executor.run(self._program, feed=feed, fetch_list=self._fetch)
        finally:
            paddle.disable_static()
        return tuple(paddle.to_tensor(v, place=paddle.CPUPlace()) for v in values)
