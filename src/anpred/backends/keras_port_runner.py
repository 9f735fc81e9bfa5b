"""A user's port to Keras (TensorFlow): their ``keras.Model``, layers by name, outputs through
a wrapper of each anchor layer's ``call`` (:class:`~anpred.backends.port_runner.PortRunner`).

Keras computes channels-last: a 4-D input is fed NHWC and 4-D captures are recorded as
``NHWC``, which alignment transposes back to the reference's NCHW. A layer's path is its
name, prefixed by the names of the models that hold it (``stem/conv``); a layer named like
the reference's anchor module (``stem.0``) needs no ``anchor_map``.
"""

from __future__ import annotations

from typing import Any, final

import numpy as np
import tensorflow as tf

from anpred.backends.base import ModelJob
from anpred.backends.port_runner import OutputHook, PortRunner
from anpred.errors import UsageError


def _nchw_to_nhwc(array: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(array.transpose(0, 2, 3, 1)) if array.ndim == 4 else array


@final
class KerasPortRunner(PortRunner):
    """The user's ``keras.Model`` (eager, float32, channels-last)."""

    library = "tensorflow"
    layout = "NHWC"

    def activate_impl(self, job: ModelJob) -> None:
        tf.random.set_seed(job.seed)
        super().activate_impl(job)

    def check_port(self, port: Any) -> None:
        if not isinstance(port, tf.keras.Model):
            raise UsageError(f"the keras port is a {type(port).__name__}, not a keras Model")

    def layers(self, port: Any) -> dict[str, Any]:
        found: dict[str, Any] = {}

        def walk(model: Any, prefix: str) -> None:
            for layer in getattr(model, "layers", []):
                path = f"{prefix}{layer.name}"
                found[path] = layer
                found.setdefault(layer.name, layer)  # Keras names are unique in a model
                walk(layer, f"{path}/")

        walk(port, "")
        return found

    def hook_layer(self, layer: Any, hook: OutputHook) -> None:
        original = layer.call

        def call(*args: Any, **kwargs: Any) -> Any:
            return hook(original(*args, **kwargs))

        layer.call = call

    def call(self, feed: np.ndarray) -> Any:
        return self.port(tf.constant(_nchw_to_nhwc(np.asarray(feed, dtype=np.float32))))

    def tensors(self, value: Any) -> list[Any]:
        if tf.is_tensor(value):
            return [value]
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list | tuple):
            return [t for item in value for t in self.tensors(item)]
        return []

    def to_numpy(self, tensor: Any) -> np.ndarray:
        return np.asarray(tensor.numpy())

    def to_tensor(self, array: np.ndarray) -> Any:
        return tf.constant(_nchw_to_nhwc(np.asarray(array, dtype=np.float32)))

    def parameters(self) -> list[tuple[str, np.ndarray]]:
        return [(w.path, np.asarray(w.numpy())) for w in self.port.trainable_weights]

    def version(self) -> str:
        return str(tf.__version__)
