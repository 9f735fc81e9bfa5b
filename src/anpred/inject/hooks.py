"""Fault injection into translated graphs: the per-node hooks of
:class:`~anpred.translate.graph.GraphProgram`.

The hooks run inside the library's traced/compiled function (``jax.jit``, ``tf.function``,
``torch.compile``), so the fault is computed with the library's own operators, as part of
the program the library executes. Nodes outside the fault's targets pass through
untouched (the hooks return the very same values).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from anpred.inject.math import FaultMath
from anpred.inject.spec import FaultSpec, Target, fault_kind
from anpred.translate.registry import NodeCall


class FaultHooks:
    """The pre- and post-node hooks that apply one fault to its target nodes.

    Args:
        spec: The fault.
        targets: Keys of the nodes it applies to (see :mod:`anpred.inject.stages`).
        math: The library's :class:`~anpred.inject.math.FaultMath`.

    Attributes:
        applied: Keys of the target nodes the hooks have acted on so far.
    """

    def __init__(self, spec: FaultSpec, targets: Collection[str], math: FaultMath) -> None:
        self.spec = spec
        self.kind = fault_kind(spec.kind)
        if self.kind.target is Target.ATTRIBUTE:
            raise ValueError(f"fault {spec.kind} rewrites the graph; it has no hooks")
        self.targets = frozenset(targets)
        self.math = math
        self.applied: set[str] = set()
        self._inputs: dict[str, list[Any]] = {}

    def pre(self, call: NodeCall, inputs: list[Any]) -> list[Any]:
        """Pre-node hook: fault the operands, or remember them for the output fault."""
        if call.name not in self.targets:
            return inputs
        if self.kind.target is Target.INPUT:
            self.applied.add(call.name)
            return self.kind.inputs(self.math, self.spec, call.op_type, inputs)
        if self.kind.needs_inputs:
            self._inputs[call.name] = inputs
        return inputs

    def post(self, call: NodeCall, outputs: list[Any]) -> list[Any]:
        """Post-node hook: fault the outputs."""
        if call.name not in self.targets or self.kind.target is not Target.OUTPUT:
            return outputs
        self.applied.add(call.name)
        inputs = self._inputs.pop(call.name, [])
        return self.kind.outputs(self.math, self.spec, call.op_type, inputs, outputs)
