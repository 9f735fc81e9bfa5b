"""The run policy TensorFlow translators follow: float dtype and preferred layout.

The adapter enters :func:`use` around every (traced or eager) execution of a graph, so
translators read the policy with :func:`current` instead of receiving it as an argument.
Under ``tf.function`` the policy is read while tracing, which is when it matters.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from anpred.translate.tensorflow.lean_import import tf

#: ONNX's layout (channels first); every value that is not 4-D is in it.
NCHW = "NCHW"
#: TensorFlow's native CPU layout for images (channels last).
NHWC = "NHWC"
LAYOUTS = (NHWC, NCHW)


@dataclass(frozen=True)
class Policy:
    """How a graph is executed.

    Attributes:
        layout: Layout the spatial ops (Conv, pooling, Resize) leave their 4-D outputs in:
            ``"NHWC"`` (propagated by layout-transparent ops) or ``"NCHW"`` (ONNX's; the
            spatial ops then transpose around their NHWC kernels).
        float_dtype: The single floating dtype of the whole graph (``"float32"`` or
            ``"float64"``); every float constant, feed, Cast and fill uses it.
    """

    layout: str = NHWC
    float_dtype: str = "float32"

    @property
    def tf_float(self) -> tf.DType:
        """The float dtype as a ``tf.DType``."""
        return tf.as_dtype(self.float_dtype)


_DEFAULT = Policy()
_CURRENT: ContextVar[Policy] = ContextVar("anpred_tensorflow_policy")


def current() -> Policy:
    """Return the policy of the graph being executed (the default outside any run)."""
    return _CURRENT.get(_DEFAULT)


@contextmanager
def use(policy: Policy) -> Iterator[None]:
    """Run the enclosed code (graph execution or tracing) under ``policy``."""
    token = _CURRENT.set(policy)
    try:
        yield
    finally:
        _CURRENT.reset(token)
