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
