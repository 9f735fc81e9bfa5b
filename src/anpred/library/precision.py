"""Declared precision: the arithmetic a library configuration computes in, and its class.

Every configuration of a :class:`~anpred.library.Library` declares a :class:`Precision`
(``Library.precisions``; an undeclared configuration is fp32). The oracle judges each
participant **within its precision class** (:attr:`Precision.judged_class`): fp32
participants against fp32 participants and the fp32 noise floor; a reduced-precision
participant against the members of its class and against its class's **ideal
reference**, the fp64 model with each operator's output (and the operands of
convolutions and matrix products) rounded to the class's format
(:mod:`anpred.translate.torch.emulation`): what correct arithmetic of that precision does
on this model and input (``docs/oracle.md``).

The ideal references are torch configurations named ``torch[ideal-<class>]``
(:func:`ideal_reference`); a run adds the ones its classes need, like it adds the fp32
reference. Nothing here imports a DL library.
"""

from __future__ import annotations

from dataclasses import dataclass

from anpred.errors import UsageError

#: Number formats a configuration may declare, and the torch dtype name that emulates
#: each (``tf32`` has none: it is emulated by rounding float32's mantissa to 10 bits).
FORMATS: dict[str, str | None] = {
    "fp64": "float64",
    "fp32": "float32",
    "tf32": None,
    "bf16": "bfloat16",
    "fp16": "float16",
}

#: What part of the computation runs in the declared format.
#:
#: - ``all``: every operator computes in the format (or stores its result in it);
#: - ``matmul``: convolutions and matrix products take operands in the format (their
#:   results follow their inputs' dtype), other operators run in float32 where the
#:   library keeps them there (``torch.autocast``, TensorFlow's auto mixed precision);
#: - ``weights``: only the weights are stored in the format; arithmetic is float32.
SCOPES = ("all", "matmul", "weights")

#: The class of every fp32 participant (and of the fp32 reference).
FP32 = "fp32"

#: Prefix of the torch configurations that compute a class's ideal reference.
IDEAL_PREFIX = "ideal-"


@dataclass(frozen=True)
class Precision:
    """The arithmetic one configuration declares.

    Attributes:
        format: The number format (:data:`FORMATS`).
        scope: Which part of the computation uses it (:data:`SCOPES`).
        note: What the library really does, in a few words (shown by ``anpred libs``).
    """

    format: str = FP32
    scope: str = "all"
    note: str = ""

    def __post_init__(self) -> None:
        if self.format not in FORMATS:
            raise UsageError(
                f"precision format must be one of {', '.join(FORMATS)}, not {self.format!r}"
            )
        if self.scope not in SCOPES:
            raise UsageError(
                f"precision scope must be one of {', '.join(SCOPES)}, not {self.scope!r}"
            )

    @property
    def reduced(self) -> bool:
        """Whether the configuration computes (partly) below fp32."""
        return self.format not in ("fp32", "fp64")

    @property
    def judged_class(self) -> str:
        """The class the oracle judges the participant in.

        fp32 and fp64 configurations are fp32 (the fp64 reference is not judged); a
        reduced format is its own class (``bf16``: every scope but weights, which round
        far less and form ``bf16-weights``). Mixed-scope configurations (``matmul``) are
        judged against the ideal of the whole format: correct arithmetic of the format
        everywhere is the most error a configuration of that format should show.
        """
        if not self.reduced:
            return FP32
        return f"{self.format}-weights" if self.scope == "weights" else self.format

    def describe(self) -> str:
        """One phrase: ``fp32``, ``bf16``, ``bf16 conv/matmul``, ``fp16 weights``."""
        scope = {"all": "", "matmul": " conv/matmul", "weights": " weights"}[self.scope]
        return self.format + scope

    def to_dict(self) -> dict[str, str]:
        """JSON form."""
        record = {"format": self.format, "scope": self.scope, "class": self.judged_class}
        if self.note:
            record["note"] = self.note
        return record


def class_emulation(judged_class: str) -> tuple[str, str]:
    """``(format, scope)`` the ideal reference of ``judged_class`` emulates.

    Raises:
        UsageError: ``fp32`` (its reference is the fp32 model itself) or an unknown class.
    """
    fmt, _, rest = judged_class.partition("-")
    if fmt not in FORMATS or fmt in ("fp32", "fp64") or rest not in ("", "weights"):
        raise UsageError(f"no ideal reference for precision class {judged_class!r}")
    return fmt, rest or "all"


def ideal_reference(judged_class: str) -> str:
    """The participant name of ``judged_class``'s ideal reference (``torch[ideal-bf16]``)."""
    class_emulation(judged_class)  # validates
    return f"torch[{IDEAL_PREFIX}{judged_class}]"


def ideal_configurations(classes: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Torch configuration name → settings of the ideal reference of each class."""
    configurations = {}
    for judged_class in classes:
        fmt, scope = class_emulation(judged_class)
        configurations[f"{IDEAL_PREFIX}{judged_class}"] = {
            "dtype": "float64",
            "emulate": fmt,
            "emulate_scope": scope,
        }
    return configurations


def ideal_class(participant: str) -> str | None:
    """The class whose ideal reference ``participant`` is, else ``None``."""
    prefix = f"torch[{IDEAL_PREFIX}"
    if participant.startswith(prefix) and participant.endswith("]"):
        return participant[len(prefix) : -1]
    return None
