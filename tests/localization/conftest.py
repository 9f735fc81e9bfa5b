"""Fixtures for the localization tests: the synthetic chain of synthetic_chain.py."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from synthetic_chain import (
    BATCH,
    C_IN,
    LENGTH,
    N_INPUTS,
    PARTICIPANTS,
    run_chain,
    run_isolated,
)


@dataclass
class ChainRun:
    """Captures of the reference and every participant for every input."""

    inputs: dict[str, np.ndarray]
    reference: dict[str, dict[str, np.ndarray]]
    captures: dict[str, dict[str, dict[str, np.ndarray]]]  # participant -> input -> anchor
    isolated: dict[str, dict[str, dict[str, np.ndarray]]]


@pytest.fixture(scope="session")
def chain() -> ChainRun:
    rng = np.random.default_rng(7)
    inputs = {
        f"x{i}": rng.standard_normal((BATCH, C_IN, LENGTH)).astype(np.float32).astype(np.float64)
        for i in range(N_INPUTS)
    }
    reference = {i: run_chain("ref", x) for i, x in inputs.items()}
    captures = {p: {i: run_chain(p, x) for i, x in inputs.items()} for p in PARTICIPANTS}
    isolated = {
        p: {i: run_isolated(p, x, reference[i]) for i, x in inputs.items()} for p in PARTICIPANTS
    }
    return ChainRun(inputs, reference, captures, isolated)
