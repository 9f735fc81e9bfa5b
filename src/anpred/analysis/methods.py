"""One interface for the oracle and every output-level baseline, and their registry.

A *method* judges the participants' outputs for one input::

    method(outputs, fp32_reference, fp64_reference) -> {participant: judgement}

``outputs`` maps every participant to its aligned float64 output (the fp32 reference
participant included), ``fp32_reference`` is the reference model's fp32 output and
``fp64_reference`` its fp64 output. A judgement is truthy when the participant passed and
carries the statistics it was decided from (Polygraphy's ``CompareFunc`` ->
``OutputCompareResult`` pattern), so comparing all methods is one loop
(:func:`judge_with_all`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterable, Mapping
from typing import Protocol

import numpy as np

Statistic = float | int | bool | str


class Judgement(Protocol):
    """What every method returns per participant."""

    @property
    def passed(self) -> bool:
        """Whether the participant passed."""
        ...

    def __bool__(self) -> bool:
        """Return :attr:`passed`."""
        ...

    def statistics(self) -> Mapping[str, Statistic]:
        """Return the numbers the decision was made from."""
        ...


Method = Callable[[Mapping[str, np.ndarray], np.ndarray, np.ndarray], Mapping[str, Judgement]]

_METHODS: dict[str, Method] = {}


def register_method(name: str) -> Callable[[Method], Method]:
    """Register a detection method (the oracle or a baseline) under ``name``.

    Raises:
        ValueError: When ``name`` is registered already.
    """

    def decorator(method: Method) -> Method:
        if name in _METHODS:
            raise ValueError(f"method '{name}' is registered twice")

        @functools.wraps(method)
        def quiet(
            outputs: Mapping[str, np.ndarray],
            fp32_reference: np.ndarray,
            fp64_reference: np.ndarray,
        ) -> Mapping[str, Judgement]:
            # NaN and inf in outputs are verdicts (a method fails them), not warnings
            with np.errstate(all="ignore"):
                return method(outputs, fp32_reference, fp64_reference)

        _METHODS[name] = quiet
        return method

    return decorator


def get_method(name: str) -> Method:
    """Return the method registered as ``name``.

    Raises:
        KeyError: With the list of known methods when ``name`` is not registered.
    """
    try:
        return _METHODS[name]
    except KeyError:
        raise KeyError(f"no method '{name}'; registered: {sorted(_METHODS)}") from None


def method_names() -> tuple[str, ...]:
    """Names of all registered methods, in registration order."""
    return tuple(_METHODS)


def judge_with_all(
    outputs: Mapping[str, np.ndarray],
    fp32_reference: np.ndarray,
    fp64_reference: np.ndarray,
    names: Iterable[str] | None = None,
) -> dict[str, Mapping[str, Judgement]]:
    """Run several methods on the same outputs.

    Args:
        outputs: ``{participant: aligned float64 output}``.
        fp32_reference: The reference model's fp32 output.
        fp64_reference: The reference model's fp64 output.
        names: Methods to run; all registered ones when ``None``.

    Returns:
        ``{method: {participant: judgement}}``.
    """
    chosen = method_names() if names is None else tuple(names)
    return {n: get_method(n)(outputs, fp32_reference, fp64_reference) for n in chosen}
