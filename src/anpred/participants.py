"""Participants: a library in one precision configuration, named ``library[config]``.

Configurations are registered per library (``@``-free: a table, extended by later work);
``anpred libs`` lists them and ``--libs`` accepts them.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anpred.errors import UsageError

#: Library → (import name, pip extra).
LIBRARIES: dict[str, tuple[str, str]] = {
    "torch": ("torch", "torch"),
    "onnxruntime": ("onnxruntime", "onnxruntime"),
    "openvino": ("openvino", "openvino"),
    "tensorflow": ("tensorflow", "tensorflow"),
    "jax": ("jax", "jax"),
    "paddle": ("paddle", "paddle"),
}

#: The default clean fp32 participants, in display order.
DEFAULT_LIBRARIES = tuple(LIBRARIES)

#: oneDNN's switch in TensorFlow; read once, when TensorFlow is imported.
_ONEDNN = "TF_ENABLE_ONEDNN_OPTS"

#: Library → configuration name → settings. ``""`` is the default configuration.
#:
#: A settings key ``"env"`` holds environment variables the participant's worker process
#: starts with (settings a library reads at import, such as ``TF_ENABLE_ONEDNN_OPTS``).
#: What each configuration really does on the machine at hand (bf16 support, fallbacks)
#: is recorded by the runner's ``describe_settings()`` in the run's results.
CONFIGURATIONS: dict[str, dict[str, dict[str, Any]]] = {
    "torch": {
        "": {},
        "fp64": {"dtype": "float64"},
        # torch.compile (inductor) of the module wrapped so that anchors are its outputs.
        "compile": {"compile": True},
        # torch.autocast(device_type="cpu", dtype=torch.bfloat16) around every forward.
        "bf16": {"autocast": "bfloat16"},
    },
    "onnxruntime": {"": {}, **{f"O{i}": {"optimization": f"O{i}"} for i in range(4)}},
    "openvino": {"": {}, "bf16": {"precision": "bf16"}, "f16": {"precision": "f16"}},
    "tensorflow": {
        "": {},
        "nchw": {"layout": "NCHW"},
        "eager": {"function": False},
        "xla": {"jit_compile": True},
        "onednn": {"env": {_ONEDNN: "1"}},
        "onednn-off": {"env": {_ONEDNN: "0"}},
        # grappler's auto_mixed_precision_onednn_bfloat16 pass; it needs oneDNN on.
        "bf16": {"mixed_precision": "bfloat16", "env": {_ONEDNN: "1"}},
    },
    "jax": {
        "": {},
        "nojit": {"jit": False},
        # Compute dtype bfloat16 (a jmp/flax-style policy): weights and input rounded to
        # bfloat16, every op computes in it, outputs widened to float32.
        "bf16": {"dtype": "bfloat16"},
    },
    # paddle.amp.auto_cast has no effect on CPU (paddle 3.3.1 says so and leaves
    # conv2d/matmul in float32), so paddle has no bf16 participant.
    "paddle": {"": {}, "static": {"static": True}},
}

#: The fp64 reference participant.
REFERENCE64 = "torch[fp64]"
#: The fp32 reference participant (its deviation from fp64 is the noise floor).
REFERENCE32 = "torch"


@dataclass(frozen=True)
class Participant:
    """One library in one configuration."""

    name: str
    library: str
    config: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "name": self.name,
            "library": self.library,
            "config": self.config,
            "settings": dict(self.settings),
        }

    def environment(self) -> dict[str, str]:
        """Return the environment variables this participant's worker must start with."""
        return {str(k): str(v) for k, v in dict(self.settings.get("env") or {}).items()}


def is_available(library: str) -> bool:
    """Return whether ``library`` is importable (without importing it)."""
    return importlib.util.find_spec(LIBRARIES[library][0]) is not None


def parse_participant(spec: str) -> Participant:
    """Parse ``library`` or ``library[config]``.

    Raises:
        UsageError: Unknown library or configuration.
    """
    spec = spec.strip()
    library, _, rest = spec.partition("[")
    config = rest.rstrip("]") if rest else ""
    if library not in LIBRARIES:
        raise UsageError(f"unknown library {library!r}; choose from {', '.join(LIBRARIES)}")
    configs = CONFIGURATIONS[library]
    if config not in configs:
        choices = ", ".join(f"{library}[{c}]" for c in configs if c)
        raise UsageError(f"unknown configuration {spec!r}; {library} has {choices or 'none'}")
    name = f"{library}[{config}]" if config else library
    return Participant(name, library, config, configs[config])


def parse_participants(specs: Sequence[str] | str | None) -> list[Participant]:
    """Parse ``--libs`` (comma list, default ``all``).

    ``all`` means every installed library in its default configuration; it may be combined
    with configurations, e.g. ``all,torch[bf16],jax[nojit]``.

    Raises:
        UsageError: Unknown names, duplicates, or a named library that is not installed.
    """
    if specs is None or specs == "all" or specs == ["all"]:
        return [parse_participant(lib) for lib in DEFAULT_LIBRARIES if is_available(lib)]
    items = specs.split(",") if isinstance(specs, str) else [s for x in specs for s in x.split(",")]
    participants = []
    for item in (i.strip() for i in items):
        if item == "all":
            participants += parse_participants("all")
        elif item:
            participants.append(parse_participant(item))
    names = [p.name for p in participants]
    if len(set(names)) != len(names):
        raise UsageError(f"participant listed twice in {','.join(names)}")
    for p in participants:
        if not is_available(p.library):
            _, extra = LIBRARIES[p.library]
            raise UsageError(
                f"library '{p.library}' is not installed; "
                f"install it with: pip install 'anpred[{extra}]'"
            )
    return participants
