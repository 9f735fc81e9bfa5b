"""A hand-written Keras port of ``tests/interchange/user_modules.py:SmallCnn`` (NHWC)."""

from __future__ import annotations

from typing import Any

import keras
import numpy as np


def build(weights: str, approximate: bool = False) -> Any:
    """The port with the torch module's weights (``np.savez`` of its state_dict).

    Args:
        weights: The ``.npz`` of the torch state_dict.
        approximate: GELU's tanh approximation instead of erf (a numerical difference).
    """
    state = dict(np.load(weights))
    inputs = keras.Input((32, 32, 3))
    x = keras.layers.Conv2D(8, 3, padding="same", name="stem_conv")(inputs)
    x = keras.layers.ReLU(name="stem_act")(x)
    x = keras.layers.Conv2D(8, 3, padding="same", name="body_conv1")(x)
    x = keras.layers.Activation(
        lambda t: keras.activations.gelu(t, approximate=approximate), name="body_gelu"
    )(x)
    x = keras.layers.ZeroPadding2D(1)(x)  # torch's padding=1 with stride 2 (not 'same')
    x = keras.layers.Conv2D(16, 3, strides=2, padding="valid", name="body_conv2")(x)
    x = keras.layers.GlobalAveragePooling2D(keepdims=True, name="pool")(x)
    x = keras.layers.Flatten()(x)
    outputs = keras.layers.Dense(10, name="head")(x)
    model = keras.Model(inputs, outputs)
    for layer, source in (
        ("stem_conv", "stem.0"), ("body_conv1", "body.0"), ("body_conv2", "body.2"),
    ):  # fmt: skip
        kernel = state[f"{source}.weight"].transpose(2, 3, 1, 0)  # OIHW -> HWIO
        model.get_layer(layer).set_weights([kernel, state[f"{source}.bias"]])
    model.get_layer("head").set_weights([state["head.weight"].T, state["head.bias"]])
    return model
