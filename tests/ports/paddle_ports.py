"""Hand-written paddle ports of ``tests/interchange/user_modules.py:SmallCnn``."""

from __future__ import annotations

import numpy as np
import paddle
from paddle import nn


class SmallCnnPort(nn.Layer):
    """SmallCnn in paddle, with the same layer names (so no anchor map is needed)."""

    def __init__(self, approximate: bool = False) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2D(3, 8, 3, padding=1), nn.ReLU())
        self.body = nn.Sequential(
            nn.Conv2D(8, 8, 3, padding=1),
            nn.GELU(approximate=approximate),
            nn.Conv2D(8, 16, 3, stride=2, padding=1),
        )
        self.drop = nn.Dropout(0.1)
        self.pool = nn.AdaptiveAvgPool2D(1)
        self.head = nn.Linear(16, 10)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return self.head(paddle.flatten(self.pool(self.drop(self.body(self.stem(x)))), 1))


def build(weights: str, approximate: bool = False, wrong: str | None = None) -> nn.Layer:
    """The port with the torch module's weights (``np.savez`` of its state_dict).

    Args:
        weights: The ``.npz`` of the torch state_dict.
        approximate: GELU's tanh approximation instead of erf (a numerical difference).
        wrong: A parameter whose first value is transferred wrong (a weights mismatch).
    """
    port = SmallCnnPort(approximate)
    state = dict(np.load(weights))
    for name, parameter in port.named_parameters():
        value = state[name]
        if name == "head.weight":  # paddle's Linear holds [in, out]
            value = value.T
        if name == wrong:
            value = value.copy()
            value.flat[0] += 0.5
        parameter.set_value(np.ascontiguousarray(value, dtype=np.float32))
    return port


class BlockPort(nn.Layer):
    """``Block`` in paddle, with the same layer names."""

    def __init__(self, dim: int = 16, epsilon: float = 1e-5) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, epsilon=epsilon)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, epsilon=epsilon)
        self.fc1 = nn.Linear(dim, 4 * dim)
        self.act = nn.GELU()
        self.fc2 = nn.Linear(4 * dim, dim)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        q, k, v = paddle.chunk(self.qkv(self.norm1(x)), 3, axis=-1)
        scores = paddle.matmul(q, k, transpose_y=True) / q.shape[-1] ** 0.5
        x = x + self.proj(paddle.matmul(nn.functional.softmax(scores, axis=-1), v))
        return x + self.fc2(self.act(self.fc1(self.norm2(x))))


def build_block(weights: str, epsilon: float = 1e-5) -> nn.Layer:
    """The block port with the torch module's weights; ``epsilon``: LayerNorm's."""
    port = BlockPort(epsilon=epsilon)
    state = dict(np.load(weights))
    for name, parameter in port.named_parameters():
        value = state[name]
        if value.ndim == 2:  # Linear: paddle holds [in, out]
            value = value.T
        parameter.set_value(np.ascontiguousarray(value, dtype=np.float32))
    return port
