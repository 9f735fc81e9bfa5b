"""Conformance cases of the ops real trained models add to the zoo's (issues 12 and 18).

ConvTranspose (segmentation / text-detection decoders: PP-OCR det), Upsample (opset 7-9
exports), LRN and the variadic Sum / Mean (the ONNX model zoo's AlexNet, Inception v1,
ResNet-50, ShuffleNet) and the recurrent LSTM / GRU (CRNN-style OCR heads: ddddocr). Every
case is checked against ONNX's reference evaluator in float64, at the suite's tolerance
rule.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from conformance.cases import OpCase, feed, make_case, static, weight


def _ct(case_id: str, x: tuple[int, ...], w: tuple[int, ...], bias: bool, **attrs: Any) -> OpCase:
    inputs = [feed(*x), weight(*w)] + ([weight(w[1] * attrs.get("group", 1))] if bias else [])
    return make_case("ConvTranspose", case_id, inputs, **attrs)


def conv_transposes() -> list[OpCase]:
    """ConvTranspose: the PP-OCR det upsampler (k2 s2), pads, output_padding, groups ..."""
    return [
        _ct("k2_s2_bias", (1, 8, 5, 6), (8, 4, 2, 2), True, strides=[2, 2]),
        _ct("k3_s2_pad1_outpad1", (1, 4, 5, 5), (4, 3, 3, 3), True, strides=[2, 2],
            pads=[1, 1, 1, 1], output_padding=[1, 1]),
        _ct("k4_s2_pad1", (2, 3, 4, 5), (3, 2, 4, 4), False, strides=[2, 2], pads=[1, 1, 1, 1]),
        _ct("asym_pads", (1, 3, 5, 5), (3, 2, 3, 3), True, pads=[0, 1, 2, 1]),
        _ct("group2_dilation2", (1, 4, 5, 5), (4, 3, 3, 3), True, group=2, dilations=[2, 2]),
        _ct("depthwise_s2", (1, 4, 6, 6), (4, 1, 4, 4), True, group=4, strides=[2, 2],
            pads=[1, 1, 1, 1]),
        _ct("same_upper_s2", (1, 3, 5, 5), (3, 2, 3, 3), False, strides=[2, 2],
            auto_pad="SAME_UPPER"),
        _ct("output_shape", (1, 3, 4, 4), (3, 2, 3, 3), True, strides=[3, 2],
            output_shape=[12, 9]),
        _ct("conv1d", (2, 3, 7), (3, 4, 5), True, strides=[3], pads=[1, 2]),
        _ct("conv3d", (1, 2, 3, 4, 3), (2, 2, 2, 3, 2), True, strides=[2, 1, 2]),
    ]  # fmt: skip


def upsamples() -> list[OpCase]:
    """Upsample (deprecated): scales as input (opset 9) and as attribute (opset 7).

    ONNX's reference evaluator computes opset-9 nearest Upsample with integer scales only,
    so the cases are those (the linear mode and opset 7's scales attribute share the same
    Resize path: :mod:`anpred.translate.upsample`).
    """
    x = feed(1, 2, 3, 4)
    scales = static([1.0, 1.0, 2.0, 3.0], np.float32, fixed_dtype=True)
    scales2 = static([1.0, 1.0, 3.0, 1.0], np.float32, fixed_dtype=True)
    return [
        make_case("Upsample", "nearest_opset9", [x, scales], mode="nearest", opset=9),
        make_case("Upsample", "nearest_opset9_batch", [feed(2, 3, 2, 5), scales2], opset=9),
    ]  # fmt: skip


def lrns() -> list[OpCase]:
    """LRN on 4-D inputs (the reference evaluator's only rank): AlexNet's size 5 and an
    even size.
    """
    x = feed(1, 8, 5, 5, low=-3.0, high=3.0)
    return [
        make_case("LRN", "alexnet_size5", [x], size=5, alpha=1e-4, beta=0.75, bias=1.0),
        make_case("LRN", "size3_strong", [x], size=3, alpha=0.5, beta=0.6, bias=2.0),
        # even size: ONNX's window has its extra channel after the centre
        make_case("LRN", "even_size4", [x], size=4, alpha=0.3, beta=0.75, bias=1.5),
    ]


def variadics() -> list[OpCase]:
    """Sum and Mean of one, two and three broadcast inputs (ResNet-50's residual Sum)."""
    a, b, c = feed(2, 3, 4, 5), feed(2, 3, 4, 5), feed(1, 3, 1, 5)
    return [
        make_case("Sum", "two", [a, b], opset=8),
        make_case("Sum", "three_broadcast", [a, b, c]),
        make_case("Sum", "one", [a]),
        make_case("Mean", "three_broadcast", [a, b, c]),
        make_case("Mean", "two", [a, b]),
    ]


def _rnn(op: str, case_id: str, gates: int, seq: int, batch: int, size: int, hidden: int,
         dirs: int = 1, bias: bool = True, h0: bool = False, extra: tuple = (),
         **attrs: Any) -> OpCase:  # fmt: skip
    layout = attrs.get("layout", 0)
    x = feed(batch, seq, size) if layout else feed(seq, batch, size)
    state = (batch, dirs, hidden) if layout else (dirs, batch, hidden)
    inputs = [
        x,
        weight(dirs, gates * hidden, size),
        weight(dirs, gates * hidden, hidden),
        weight(dirs, 2 * gates * hidden) if bias else None,
        None,
        weight(*state) if h0 else None,
        *extra,
    ]
    while inputs and inputs[-1] is None:
        inputs.pop()
    n_outputs = 3 if op == "LSTM" else 2
    return make_case(op, case_id, inputs, n_outputs=n_outputs, hidden_size=hidden, **attrs)


def recurrents() -> list[OpCase]:
    """LSTM and GRU: forward, reverse, bidirectional, batch-first, states, peepholes."""
    peep = (weight(1, 2, 6), weight(1, 18))  # initial_c (1, batch 2, hidden 6), P
    return [
        _rnn("LSTM", "forward_bias", 4, 5, 2, 4, 6),
        _rnn("LSTM", "bidirectional_ocr", 4, 7, 1, 8, 5, dirs=2, direction="bidirectional"),
        _rnn("LSTM", "reverse_nobias", 4, 4, 3, 3, 4, bias=False, direction="reverse"),
        _rnn("LSTM", "states_peepholes", 4, 3, 2, 4, 6, h0=True, extra=peep),
        _rnn("LSTM", "batch_first", 4, 4, 2, 3, 5, dirs=2, direction="bidirectional", layout=1,
             h0=True),
        _rnn("GRU", "forward_bias", 3, 5, 2, 4, 6),
        _rnn("GRU", "linear_before_reset", 3, 5, 2, 4, 6, linear_before_reset=1),
        _rnn("GRU", "bidirectional_states", 3, 4, 3, 3, 5, dirs=2, direction="bidirectional",
             h0=True),
        _rnn("GRU", "reverse_nobias", 3, 4, 2, 3, 4, bias=False, direction="reverse"),
    ]  # fmt: skip


FAMILIES = (conv_transposes, upsamples, lrns, variadics, recurrents)
