"""A synthetic six-stage chain in pure NumPy where the location of the error is known.

Stages (activations are (N, C, L); anchors are named after the stage that produces them):

    dense_tanh  channel-mixing matmul + tanh
    conv        1-D correlation over L, kernel 3, zero padding
    norm        normalisation over channels (layer-norm style)
    sigmoid     saturating sigmoid, sigmoid(h + 7): most outputs sit near 1
    dense_tanh2 channel-mixing matmul + tanh
    head        mean over L + linear head -> (N, K)

Participants: the fp64 reference; ``A`` (float32); ``B`` (float32 with another summation
order: conv taps reversed, one-pass variance); ``C`` (float32 whose ``conv`` output is
rounded to bfloat16, emulated by rounding the float32 mantissa to 8 significant bits).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

STAGES = ("dense_tanh", "conv", "norm", "sigmoid", "dense_tanh2", "head")
PARTICIPANTS = ("A", "B", "C")
BF16_PARTICIPANT = "C"
BF16_STAGE = "conv"
SIGMOID_STAGE = "sigmoid"
N_INPUTS = 4
C_IN, CHANNELS, LENGTH, CLASSES, BATCH = 16, 64, 32, 10, 2


def bf16_round(x: np.ndarray) -> np.ndarray:
    """Round float32 values to bfloat16 (8 significant bits), nearest-even, as float32."""
    bits = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    lsb = (bits >> np.uint32(16)) & np.uint32(1)
    rounded = (bits + np.uint32(0x7FFF) + lsb) & np.uint32(0xFFFF0000)
    return rounded.astype(np.uint32).view(np.float32)


def _parameters() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1234)
    return {
        "w1": rng.standard_normal((CHANNELS, C_IN)) / np.sqrt(C_IN),
        "b1": 0.1 * rng.standard_normal(CHANNELS),
        "wc": rng.standard_normal((CHANNELS, CHANNELS, 3)) / np.sqrt(3 * CHANNELS),
        "w5": rng.standard_normal((CHANNELS, CHANNELS)) / np.sqrt(CHANNELS),
        "wh": rng.standard_normal((CLASSES, CHANNELS)) / np.sqrt(CHANNELS),
        "bh": 0.1 * rng.standard_normal(CLASSES),
    }


PARAMETERS = _parameters()

Stage = Callable[[np.ndarray], np.ndarray]


def stage_functions(participant: str) -> dict[str, Stage]:
    """The six stages as ``participant`` computes them (``"ref"`` is the fp64 reference)."""
    dt = np.float64 if participant == "ref" else np.float32
    p = {k: v.astype(dt) for k, v in PARAMETERS.items()}
    taps = (2, 1, 0) if participant == "B" else (0, 1, 2)

    def dense_tanh(x: np.ndarray) -> np.ndarray:
        return np.tanh(np.einsum("dc,ncl->ndl", p["w1"], x) + p["b1"][None, :, None])

    def conv(h: np.ndarray) -> np.ndarray:
        padded = np.pad(h, ((0, 0), (0, 0), (1, 1)))
        out = np.zeros_like(h)
        for k in taps:
            out = out + np.einsum("dc,ncl->ndl", p["wc"][:, :, k], padded[:, :, k : k + h.shape[2]])
        if participant == BF16_PARTICIPANT:
            out = bf16_round(out)
        return out

    def norm(h: np.ndarray) -> np.ndarray:
        mean = h.mean(axis=1, keepdims=True)
        if participant == "B":
            var = (h * h).mean(axis=1, keepdims=True) - mean * mean
        else:
            var = ((h - mean) ** 2).mean(axis=1, keepdims=True)
        return (h - mean) / np.sqrt(var + dt(1e-5))

    def sigmoid(h: np.ndarray) -> np.ndarray:
        return dt(1) / (dt(1) + np.exp(-(h + dt(7))))

    def dense_tanh2(h: np.ndarray) -> np.ndarray:
        return np.tanh(np.einsum("dc,ncl->ndl", p["w5"], h))

    def head(h: np.ndarray) -> np.ndarray:
        return np.einsum("kc,nc->nk", p["wh"], h.mean(axis=2)) + p["bh"]

    fns = (dense_tanh, conv, norm, sigmoid, dense_tanh2, head)
    return dict(zip(STAGES, fns, strict=True))


def run_chain(participant: str, x: np.ndarray) -> dict[str, np.ndarray]:
    """End-to-end run; returns the capture at every anchor."""
    dt = np.float64 if participant == "ref" else np.float32
    h = x.astype(dt)
    captures = {}
    for stage, fn in stage_functions(participant).items():
        h = fn(h).astype(dt)
        captures[stage] = h
    return captures


def run_isolated(participant: str, x: np.ndarray, ref: dict[str, np.ndarray]) -> dict:
    """Stage isolation: each stage on the fp64 reference's stage input rounded to float32."""
    inputs = [x, *(ref[s] for s in STAGES[:-1])]
    fns = stage_functions(participant)
    return {s: fns[s](i.astype(np.float32)) for s, i in zip(STAGES, inputs, strict=True)}
