"""Geometry of ONNX ConvTranspose: output sizes and the crop of the full transposed window.

Every library translates ConvTranspose the same way: its own transposed-convolution kernel
computes the *full* result (no padding, no output padding), whose length along a spatial
axis is ``stride * (in - 1) + (kernel - 1) * dilation + 1``; ONNX's output is then the
window ``[begin, begin + out)`` of that result, where indices past its end (output padding,
or an ``output_shape`` larger than the full result) hold zeros (plus the bias). Pure index
arithmetic on attributes and static shapes, no tensors.

ONNX rules (ConvTranspose, opset 1-22; as onnxruntime and ``onnx.reference`` implement):

* ``output_shape`` given: ``total = stride * (in - 1) + output_padding + span - out``
  (negative when ``output_shape`` exceeds the full result, as in ONNX's own
  ``test_convtranspose_output_shape``: zeros are appended); pads are
  ``(total - total // 2, total // 2)``, or ``(total // 2, total - total // 2)`` with
  ``auto_pad = SAME_UPPER`` (explicit ``pads`` are ignored), with Python's floor division
  as in ``onnx.reference``. onnxruntime 1.32 puts the odd pad of an odd positive ``total``
  at the end instead when ``auto_pad`` is NOTSET.
* ``auto_pad`` ``SAME_UPPER``/``SAME_LOWER`` without ``output_shape``: ``out = in * stride``,
  pads as above.
* otherwise ``out = stride * (in - 1) + output_padding + span - begin - end``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from anpred.translate.registry import NodeCall


@dataclass(frozen=True)
class TransposedWindow:
    """Resolved geometry of one ConvTranspose node for one input shape.

    Attributes:
        strides: Strides per spatial axis.
        dilations: Dilations per spatial axis.
        group: Number of groups.
        full: Length of the full (unpadded) transposed convolution per axis.
        begin: Leading elements of the full result that ONNX drops (its begin pads).
        out: ONNX output length per axis.
    """

    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    group: int
    full: tuple[int, ...]
    begin: tuple[int, ...]
    out: tuple[int, ...]

    @property
    def end_pad(self) -> tuple[int, ...]:
        """Elements to add (positive) or drop (negative) after the full result's end."""
        return tuple(o + b - f for o, b, f in zip(self.out, self.begin, self.full, strict=True))

    @property
    def trivial(self) -> bool:
        """Whether ONNX's output is exactly the full result."""
        return all(b == 0 for b in self.begin) and self.out == self.full


def transposed_window(
    call: NodeCall, spatial: Sequence[int], kernel: Sequence[int]
) -> TransposedWindow:
    """Resolve strides, dilations, pads / ``auto_pad`` / ``output_shape`` of a ConvTranspose.

    Args:
        call: The ConvTranspose node.
        spatial: Static input sizes of the spatial axes.
        kernel: Kernel sizes (from the weight's shape).

    Returns:
        The geometry.

    Raises:
        ValueError: For an attribute whose length does not match the spatial rank.
    """
    n = len(spatial)
    strides = [int(s) for s in call.attr("strides", [1] * n)]
    dilations = [int(d) for d in call.attr("dilations", [1] * n)]
    output_padding = [int(p) for p in call.attr("output_padding", [0] * n)][:n]
    if len(strides) != n or len(dilations) != n or len(output_padding) != n:
        raise ValueError(f"ConvTranspose node {call.name}: attributes do not match {n}-D input")
    spans = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    full = [s * (i - 1) + span for s, i, span in zip(strides, spatial, spans, strict=True)]
    auto_pad = call.attr("auto_pad", "NOTSET")
    if isinstance(auto_pad, bytes):
        auto_pad = auto_pad.decode()
    output_shape = call.attr("output_shape")
    if output_shape is not None or auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        if output_shape is not None:
            out = [int(v) for v in output_shape][-n:]
        else:
            out = [i * s for i, s in zip(spatial, strides, strict=True)]
        begin = []
        for f, p, o in zip(full, output_padding, out, strict=True):
            total = f + p - o
            begin.append(total // 2 if auto_pad == "SAME_UPPER" else total - total // 2)
    elif auto_pad == "VALID":
        begin = [0] * n
        out = [f + p for f, p in zip(full, output_padding, strict=True)]
    else:
        pads = [int(p) for p in call.attr("pads", [0] * (2 * n))]
        begin = pads[:n]
        out = [f + p - b - e for f, p, b, e in zip(full, output_padding, begin, pads[n:],
                                                   strict=True)]  # fmt: skip
    return TransposedWindow(tuple(strides), tuple(dilations), int(call.attr("group", 1)),
                            tuple(full), tuple(begin), tuple(out))  # fmt: skip
