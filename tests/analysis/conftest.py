"""Synthetic captures with known answers for the analysis tests.

A small network of 1x1 convolutions (channel matmuls) with tanh between them is run by
several "participants" that compute exactly the same thing in float32 but accumulate the
matmul reductions in different orders (BLAS, fixed-size blocks, a permuted order, plain
sequential summation). Their captures differ by genuine fp32 rounding noise only. The fp64
reference runs the same float32 weights in float64.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

CHANNELS = (24, 96, 64, 128, 48)
"""Channels of the input and of the four anchors; reductions are 24 to 128 terms long."""

SPATIAL = (12, 12)


def _blas(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return w @ x


def _blocked(block: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def matmul(w: np.ndarray, x: np.ndarray) -> np.ndarray:
        out = np.zeros((w.shape[0], x.shape[1]), dtype=w.dtype)
        for start in range(0, w.shape[1], block):
            out += w[:, start : start + block] @ x[start : start + block]
        return out

    return matmul


def _permuted(seed: int) -> Callable[[np.ndarray, np.ndarray], np.ndarray]:
    def matmul(w: np.ndarray, x: np.ndarray) -> np.ndarray:
        order = np.random.default_rng(seed).permutation(w.shape[1])
        return w[:, order] @ x[order]

    return matmul


def _sequential(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    # numpy reduces a middle axis slice by slice: one running sum per output element
    return np.sum(w[:, :, None] * x[None, :, :], axis=1)


MATMULS: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
    "torch": _blas,
    "block4": _blocked(4),
    "block16": _blocked(16),
    "permuted": _permuted(7),
    "sequential": _sequential,
}
"""Participants and their summation orders; "torch" is the fp32 reference."""


@dataclass
class SyntheticRun:
    """Captures of every participant, the fp64 reference, per input."""

    anchors: tuple[str, ...]
    captures: dict[str, dict[str, dict[str, np.ndarray]]]  # input -> participant -> anchor
    fp64: dict[str, dict[str, np.ndarray]]  # input -> anchor

    def at(self, input_id: str, anchor: str) -> dict[str, np.ndarray]:
        return {p: c[anchor] for p, c in self.captures[input_id].items()}


def make_run(participants: tuple[str, ...], inputs: int, seed: int = 0) -> SyntheticRun:
    rng = np.random.default_rng(seed)
    weights = [
        (rng.standard_normal((c_out, c_in)) / np.sqrt(c_in)).astype(np.float32)
        for c_in, c_out in zip(CHANNELS[:-1], CHANNELS[1:], strict=True)
    ]
    anchors = tuple(f"stage{k}" for k in range(len(weights)))
    captures: dict[str, dict[str, dict[str, np.ndarray]]] = {}
    fp64: dict[str, dict[str, np.ndarray]] = {}
    for i in range(inputs):
        input_id = f"in{i}"
        x = rng.standard_normal((CHANNELS[0], SPATIAL[0] * SPATIAL[1])).astype(np.float32)
        captures[input_id] = {}
        for p in participants:
            state, out = x, {}
            for anchor, w in zip(anchors, weights, strict=True):
                state = np.tanh(MATMULS[p](w, state)).astype(np.float32)
                out[anchor] = state.reshape(1, -1, *SPATIAL).astype(np.float64)
            captures[input_id][p] = out
        state64, out64 = x.astype(np.float64), {}
        for anchor, w in zip(anchors, weights, strict=True):
            state64 = np.tanh(w.astype(np.float64) @ state64)
            out64[anchor] = state64.reshape(1, -1, *SPATIAL)
        fp64[input_id] = out64
    return SyntheticRun(anchors, captures, fp64)


@pytest.fixture(scope="session")
def five_participant_run() -> SyntheticRun:
    return make_run(tuple(MATMULS), inputs=4)
