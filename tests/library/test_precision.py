"""Declared precision: every configuration says what arithmetic it computes in (issue 35)."""

from __future__ import annotations

import pytest

from anpred.errors import UsageError
from anpred.library import Library, Loads, Precision, libraries
from anpred.library.precision import class_emulation, ideal_class, ideal_reference
from anpred.participants import ideal_participants, parse_participant, precision_of


def test_reduced_configurations_declare_their_format() -> None:
    # configurations that compute below fp32, named any way (openvino's "f16" had no mark
    # that the old name guess knew), and the fp32 ones
    reduced = {
        "torch[bf16]": "bf16",
        "openvino[bf16]": "bf16",
        "openvino[f16]": "fp16",
        "tensorflow[bf16]": "bf16",
        "jax[bf16]": "bf16",
        "litert[fp16]": "fp16-weights",
        "mnn[low]": "fp16",
    }
    for name, judged in reduced.items():
        assert precision_of(name).judged_class == judged, name
    for name in ("torch", "torch[compile]", "onnxruntime[O3]", "tensorflow[xla]", "jax[nojit]"):
        assert precision_of(name).judged_class == "fp32", name
    # a faulty participant is its clean participant's class; an unknown name is fp32
    assert precision_of("jax[bf16]!mantissa@s2").judged_class == "bf16"
    assert precision_of("nosuchlib[x]").judged_class == "fp32"


def test_every_reduced_class_has_an_ideal_reference_torch_can_run() -> None:
    for library in libraries():
        for config in library.configurations:
            judged = library.precision(config).judged_class
            if judged != "fp32":
                reference = parse_participant(ideal_reference(judged))
                assert reference.settings["dtype"] == "float64"
                assert ideal_class(reference.name) == judged


def test_ideal_participants_come_once_per_class() -> None:
    participants = [parse_participant(n) for n in ("torch", "jax[bf16]", "torch[bf16]")]
    participants.append(parse_participant("openvino[f16]"))
    assert [p.name for p in ideal_participants(participants)] == [
        "torch[ideal-bf16]",
        "torch[ideal-fp16]",
    ]
    assert ideal_participants([parse_participant("onnxruntime")]) == []


def test_a_plugin_declares_precision_the_same_way() -> None:
    lib = Library(
        name="mylib",
        distributions=("mylib",),
        extra="",
        requirement="mylib",
        import_name="mylib",
        runner="mylib.runner:Runner",
        loads=Loads.ONNX_FILE,
        configurations={"": {}, "half": {"half": True}},
        precisions={"half": {"format": "fp16", "scope": "matmul"}},
    )
    assert lib.precision("half") == Precision("fp16", "matmul")
    assert lib.precision("") == Precision()
    with pytest.raises(UsageError, match="unknown configurations"):
        Library(
            name="mylib2",
            distributions=("mylib",),
            extra="x",
            import_name="mylib",
            runner="mylib.runner:Runner",
            loads=Loads.ONNX_FILE,
            precisions={"nope": Precision("bf16")},
        )


def test_bad_precisions_are_one_line_errors() -> None:
    with pytest.raises(UsageError, match="format"):
        Precision("int4")
    with pytest.raises(UsageError, match="scope"):
        Precision("bf16", "everything")
    with pytest.raises(UsageError, match="no ideal reference"):
        class_emulation("fp32")
    assert class_emulation("fp16-weights") == ("fp16", "weights")
