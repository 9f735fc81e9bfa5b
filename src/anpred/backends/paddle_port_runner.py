"""A user's port to PaddlePaddle: their ``paddle.nn.Layer``, layers by ``named_sublayers``,
outputs through forward post hooks (:class:`~anpred.backends.port_runner.PortRunner`).
"""

from __future__ import annotations

from typing import Any, final

import numpy as np
import paddle

from anpred.backends.base import ModelJob
from anpred.backends.port_runner import OutputHook, PortRunner
from anpred.errors import UsageError


@final
class PaddlePortRunner(PortRunner):
    """The user's ``paddle.nn.Layer``, in eval mode, float32, on the CPU."""

    library = "paddle"

    def activate_impl(self, job: ModelJob) -> None:
        paddle.set_device("cpu")
        paddle.seed(job.seed)
        super().activate_impl(job)
        self.port.eval()

    def check_port(self, port: Any) -> None:
        if not isinstance(port, paddle.nn.Layer):
            raise UsageError(f"the paddle port is a {type(port).__name__}, not a paddle Layer")

    def layers(self, port: Any) -> dict[str, Any]:
        return dict(port.named_sublayers())

    def hook_layer(self, layer: Any, hook: OutputHook) -> None:
        layer.register_forward_post_hook(lambda _layer, _inputs, output: hook(output))

    def call(self, feed: np.ndarray) -> Any:
        with paddle.no_grad():
            return self.port(paddle.to_tensor(np.ascontiguousarray(feed, dtype=np.float32)))

    def tensors(self, value: Any) -> list[Any]:
        if isinstance(value, paddle.Tensor):
            return [value]
        if isinstance(value, dict):
            value = list(value.values())
        if isinstance(value, list | tuple):
            return [t for item in value for t in self.tensors(item)]
        return []

    def to_numpy(self, tensor: Any) -> np.ndarray:
        return np.asarray(tensor.numpy())

    def to_tensor(self, array: np.ndarray) -> Any:
        return paddle.to_tensor(np.asarray(array, dtype=np.float32))

    def parameters(self) -> list[tuple[str, np.ndarray]]:
        return [(n, p.numpy()) for n, p in self.port.named_parameters() if p.trainable]

    def version(self) -> str:
        return str(paddle.__version__)
