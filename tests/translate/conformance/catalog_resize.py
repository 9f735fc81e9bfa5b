"""Conformance cases of Resize: the zoo's upsampling and every variant ONNX defines.

Nearest (torch's ``nn.Upsample`` export, every rounding), linear and cubic in every
coordinate transformation, and the variants ONNX's backend tests exercise (issue 18):
``cubic_coeff_a`` / ``exclude_outside``, ``antialias``, ``keep_aspect_ratio_policy``,
``axes`` and ``tf_crop_and_resize`` with ``extrapolation_value``. Every case is checked
against ONNX's reference evaluator in float64, at the suite's tolerance rule.
"""

from __future__ import annotations

from conformance.cases import OpCase, feed, make_case, static
from conformance.catalog import scales


def resize_cases() -> list[OpCase]:
    """Resize: every mode, coordinate transformation and option ONNX defines."""
    c = make_case
    x, x8 = feed(1, 2, 4, 5), feed(1, 2, 8, 8)
    nearest = {  # what torch's nn.Upsample exports
        "mode": "nearest",
        "coordinate_transformation_mode": "asymmetric",
        "nearest_mode": "floor",
    }
    linear = {"mode": "linear"}
    return [
        c("Resize", "upsample2_torch", [x, None, scales(1, 1, 2, 2)], **nearest),
        c("Resize", "upsample3", [x, None, scales(1, 1, 3, 3)], **nearest),
        c("Resize", "sizes_nearest", [x, None, None, static([1, 2, 8, 10])], **nearest),
        c("Resize", "downsample_nearest", [x8, None, scales(1, 1, 0.5, 0.5)], **nearest),
        c("Resize", "nearest_default_modes", [x, None, scales(1, 1, 2, 2)], mode="nearest"),
        c("Resize", "nearest_half_pixel_ceil", [x, None, scales(1, 1, 1.5, 1.5)],
          mode="nearest", nearest_mode="round_prefer_ceil"),
        c("Resize", "linear_half_pixel", [x, None, scales(1, 1, 2, 2)], **linear),
        c("Resize", "linear_downsample", [x8, None, scales(1, 1, 0.5, 0.5)], **linear),
        c("Resize", "linear_align_corners", [x, None, None, static([1, 2, 7, 9])], **linear,
          coordinate_transformation_mode="align_corners"),
        c("Resize", "linear_asymmetric", [x, None, scales(1, 1, 2, 2)], **linear,
          coordinate_transformation_mode="asymmetric"),
        c("Resize", "linear_pytorch_half_pixel", [x, None, None, static([1, 2, 6, 1])],
          **linear, coordinate_transformation_mode="pytorch_half_pixel"),
        # an output axis of length 1: paddle's kernel read coordinate 0 (issue 18)
        c("Resize", "linear_downsample_to_one", [x, None, scales(1, 1, 0.3, 0.6)], **linear),
        # issue 18: half_pixel_symmetric (lengths 6.8 and 3.5 round down) and cubic
        c("Resize", "linear_half_pixel_symmetric", [x, None, scales(1, 1, 1.7, 0.7)], **linear,
          coordinate_transformation_mode="half_pixel_symmetric"),
        c("Resize", "cubic_half_pixel", [x, None, scales(1, 1, 2, 2)], mode="cubic"),
        c("Resize", "cubic_align_corners", [x, None, None, static([1, 2, 7, 9])], mode="cubic",
          coordinate_transformation_mode="align_corners"),
        # issue 18: variants no library's resize kernel computes as ONNX defines them run as
        # separable filter taps (anpred.translate.resize_taps); opset 18 for antialias, axes
        # and keep_aspect_ratio_policy
        c("Resize", "cubic_a_n0p5_exclude_outside", [x, None, scales(1, 1, 1.6, 0.8)],
          mode="cubic", cubic_coeff_a=-0.5, exclude_outside=1),
        c("Resize", "cubic_asymmetric", [x, None, scales(1, 1, 2, 1.5)], mode="cubic",
          coordinate_transformation_mode="asymmetric"),
        c("Resize", "cubic_antialias_down", [x8, None, None, static([1, 2, 5, 3])],
          mode="cubic", antialias=1, opset=18),
        c("Resize", "linear_antialias_down", [x8, None, scales(1, 1, 0.6, 0.45)], **linear,
          antialias=1, opset=18),
        c("Resize", "nearest_not_larger", [x, None, None, static([7, 7])], mode="nearest",
          axes=[2, 3], keep_aspect_ratio_policy="not_larger", opset=18),
        c("Resize", "nearest_not_smaller", [x, None, None, static([7, 7])], mode="nearest",
          axes=[2, 3], keep_aspect_ratio_policy="not_smaller", opset=18),
        c("Resize", "nearest_axes_3_2", [x, None, scales(2.0, 1.5)], mode="nearest",
          axes=[3, 2], opset=18),
        c("Resize", "linear_tf_crop_and_resize",
          [x8, scales(0, 0, 0.2, 0.4, 1, 1, 0.7, 0.9), None, static([1, 2, 5, 4])], **linear,
          coordinate_transformation_mode="tf_crop_and_resize"),
        c("Resize", "linear_tf_crop_extrapolate",
          [x8, scales(0, 0, -0.2, 0.3, 1, 1, 1.2, 0.8), None, static([1, 2, 6, 3])], **linear,
          coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=2.0),
        c("Resize", "nearest_tf_crop_extrapolate",
          [x8, scales(0, 0, -0.2, 0.3, 1, 1, 1.2, 0.8), None, static([1, 2, 6, 3])],
          mode="nearest", coordinate_transformation_mode="tf_crop_and_resize",
          extrapolation_value=-1.0),
    ]  # fmt: skip
