"""Channel-order matching for independently written implementations.

Two implementations of one network written separately (a Keras model and a torch
model) may order the channels of a layer differently. Their captures then hold the same
channels in another order, and element-wise comparison is meaningless until the order
is recovered. :func:`infer_channel_permutation` matches every reference channel to a
capture channel by the channels' statistics, solving the assignment problem with the
Hungarian method (:func:`scipy.optimize.linear_sum_assignment`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

import numpy as np

QUANTILES = (0.01, 0.05, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99)
"""Quantiles in a channel's statistical descriptor (besides mean, std, min, max)."""

CLEAR_MATCH_RATIO = 0.5
"""A match is clear when its cost is at most this fraction of the best alternative's."""

Descriptor = Literal["statistics", "values"]


class ChannelMatchError(ValueError):
    """The capture's channels cannot be matched to the reference's."""


@dataclass(frozen=True)
class ChannelPermutation:
    """Which capture channel holds each reference channel.

    Attributes:
        permutation: ``permutation[k]`` is the capture channel matched to reference
            channel ``k``; ``np.take(capture, permutation, axis)`` is in reference order.
        axis: Channel axis.
        confidence: Fraction of reference channels with a clear match (cost at most
            :data:`CLEAR_MATCH_RATIO` of the best alternative for that channel).
        ambiguous: Reference channels without a clear match (for example several
            all-zero channels, which are interchangeable anyway).
        descriptor: What was matched: ``"statistics"`` or ``"values"``.
    """

    permutation: np.ndarray
    axis: int
    confidence: float
    ambiguous: tuple[int, ...]
    descriptor: str

    @property
    def is_identity(self) -> bool:
        """Whether the channels are in reference order already."""
        return bool(np.array_equal(self.permutation, np.arange(self.permutation.size)))

    def apply(self, array: np.ndarray) -> np.ndarray:
        """Return ``array`` with its channels in reference order."""
        if array.ndim <= self.axis or array.shape[self.axis] != self.permutation.size:
            raise ChannelMatchError(
                f"channel permutation of {self.permutation.size} channels on axis "
                f"{self.axis} does not fit an array of shape {array.shape}"
            )
        return np.take(array, self.permutation, axis=self.axis)

    def step(self) -> str:
        """Describe the alignment step this permutation records."""
        return (
            f"permute channels (axis {self.axis}) matched by {self.descriptor}, "
            f"confidence {self.confidence:.3f}"
        )


def _per_channel(array: np.ndarray, axis: int) -> np.ndarray:
    """View ``array`` as (batch, channels, rest); batch is 1 when ``axis`` is 0."""
    moved = np.moveaxis(np.asarray(array, dtype=np.float64), axis, 0)
    channels = moved.shape[0]
    if axis == 0 or moved.ndim == 1:
        return moved.reshape(1, channels, math.prod(moved.shape[1:]))
    batch = moved.shape[1]
    return np.swapaxes(moved.reshape(channels, batch, math.prod(moved.shape[2:])), 0, 1)


def channel_descriptors(array: np.ndarray, axis: int, descriptor: Descriptor) -> np.ndarray:
    """One row of features per channel.

    ``"statistics"``: mean, std, min, max and :data:`QUANTILES` of the channel's values,
    for each batch item separately (several inputs stacked on the batch axis make the
    descriptor more discriminative). ``"values"``: the channel's values themselves, for
    implementations that compute the same function and differ only in channel order.
    """
    data = _per_channel(array, axis)  # (batch, channels, rest)
    if descriptor == "values":
        return np.swapaxes(data, 0, 1).reshape(data.shape[1], -1)
    if descriptor != "statistics":
        raise ValueError(f"unknown channel descriptor '{descriptor}'")
    if data.shape[2] == 0:
        return np.zeros((data.shape[1], 0))
    features = [
        data.mean(axis=2),
        data.std(axis=2),
        data.min(axis=2),
        data.max(axis=2),
        *np.quantile(data, QUANTILES, axis=2),
    ]  # each (batch, channels)
    return np.concatenate(features, axis=0).T


def infer_channel_permutation(
    capture: np.ndarray,
    reference: np.ndarray,
    axis: int = 1,
    *,
    descriptor: Descriptor = "statistics",
) -> ChannelPermutation:
    """Match the capture's channels to the reference's by their statistics.

    The cost of pairing reference channel i with capture channel j is the Euclidean
    distance of their descriptors (see :func:`channel_descriptors`); the permutation
    minimising the total cost is found with the Hungarian method.

    Args:
        capture: Capture in the reference layout (transpose it first), any float dtype.
        reference: Reference capture of the same shape.
        axis: Channel axis.
        descriptor: ``"statistics"`` (robust to element-wise differences, the default)
            or ``"values"`` (exact content; for semantically equivalent implementations).

    Returns:
        The permutation, its confidence and the ambiguous channels.

    Raises:
        ChannelMatchError: When the shapes differ or ``axis`` is out of range.
    """
    capture, reference = np.asarray(capture), np.asarray(reference)
    if capture.shape != reference.shape:
        raise ChannelMatchError(
            f"capture shape {capture.shape} differs from reference shape {reference.shape}; "
            "align layout and shape before matching channels"
        )
    if not -capture.ndim <= axis < capture.ndim:
        raise ChannelMatchError(f"axis {axis} out of range for shape {capture.shape}")
    axis %= capture.ndim
    channels = capture.shape[axis]
    if channels <= 1:
        return ChannelPermutation(np.arange(channels), axis, 1.0, (), descriptor)
    # imported here: scipy.optimize takes ~0.5 s to import, which every analysis process
    # (alignment imports this module) paid though only channel matching needs it
    from scipy.optimize import linear_sum_assignment
    from scipy.spatial.distance import cdist

    cost = cdist(
        channel_descriptors(reference, axis, descriptor),
        channel_descriptors(capture, axis, descriptor),
    )
    rows, cols = linear_sum_assignment(cost)
    permutation = np.empty(channels, dtype=np.intp)
    permutation[rows] = cols
    assigned = cost[np.arange(channels), permutation]
    alternative = np.full(channels, np.inf)
    for ref_channel in range(channels):
        row = np.delete(cost[ref_channel], permutation[ref_channel])
        column = np.delete(cost[:, permutation[ref_channel]], ref_channel)
        alternative[ref_channel] = min(row.min(), column.min())
    clear = assigned <= CLEAR_MATCH_RATIO * alternative
    clear &= ~((assigned == 0.0) & (alternative == 0.0))
    ambiguous = tuple(int(k) for k in np.flatnonzero(~clear))
    return ChannelPermutation(permutation, axis, float(np.mean(clear)), ambiguous, descriptor)
