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


def build_block(weights: str, epsilon: float = 1e-5) -> Any:
    """``tests/interchange/user_modules.py:Block`` in Keras, layers named like its modules
    (so no anchor map is needed); ``epsilon``: LayerNormalization's (Keras' default 1e-3
    would differ)."""
    ops = keras.ops
    state = dict(np.load(weights))
    inputs = keras.Input((8, 16))
    h = keras.layers.LayerNormalization(epsilon=epsilon, name="norm1")(inputs)
    q, k, v = ops.split(keras.layers.Dense(48, name="qkv")(h), 3, axis=-1)
    scores = ops.softmax(ops.matmul(q, ops.transpose(k, (0, 2, 1))) / 4.0, axis=-1)
    x = inputs + keras.layers.Dense(16, name="proj")(ops.matmul(scores, v))
    h = keras.layers.LayerNormalization(epsilon=epsilon, name="norm2")(x)
    h = keras.layers.Dense(64, name="fc1")(h)
    h = keras.layers.Activation(lambda t: keras.activations.gelu(t, approximate=False),
                                name="act")(h)  # fmt: skip
    outputs = x + keras.layers.Dense(16, name="fc2")(h)
    model = keras.Model(inputs, outputs)
    for name in ("norm1", "norm2"):
        model.get_layer(name).set_weights([state[f"{name}.weight"], state[f"{name}.bias"]])
    for name in ("qkv", "proj", "fc1", "fc2"):
        model.get_layer(name).set_weights([state[f"{name}.weight"].T, state[f"{name}.bias"]])
    return model
