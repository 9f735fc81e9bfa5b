"""Runner classes: abstract or final, capabilities declared, torch's runner chosen per job."""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from anpred.backends.base import ModelJob, NodeHooks  # noqa: E402
from anpred.backends.registry import runner_class  # noqa: E402
from anpred.backends.torch_runner import TorchGraphRunner, TorchRunner  # noqa: E402
from anpred.backends.translated_runner import (  # noqa: E402
    JaxRunner,
    PaddleRunner,
    TensorFlowRunner,
    TranslatedRunner,
)
from anpred.errors import UsageError  # noqa: E402
from anpred.interchange.export import AnchoredExport  # noqa: E402

EXPORT = AnchoredExport(Path("/export"), "images", (1, 3, 8, 8), 17, ())


def test_the_translated_base_is_abstract_and_each_library_final() -> None:
    with pytest.raises(TypeError, match="abstract"):
        TranslatedRunner({})  # type: ignore[abstract]
    runners = (TensorFlowRunner, JaxRunner, PaddleRunner, TorchGraphRunner)
    assert [r({}).library for r in runners] == ["tensorflow", "jax", "paddle", "torch"]
    assert all(r.node_hooks for r in runners)
    assert all(TranslatedRunner in r.__bases__ for r in runners)


def test_torch_runs_the_native_module_for_zoo_models_and_translators_for_onnx() -> None:
    torch_runner = runner_class("torch")
    assert torch_runner is TorchRunner
    assert torch_runner.for_job(ModelJob(EXPORT, "resnet50")) is TorchRunner
    assert torch_runner.for_job(ModelJob(EXPORT, None)) is TorchGraphRunner
    assert runner_class("onnxruntime").for_job(ModelJob(EXPORT, None)) is runner_class(
        "onnxruntime"
    )


def test_the_native_module_takes_no_node_hooks() -> None:
    assert not TorchRunner.node_hooks
    with pytest.raises(UsageError, match="cannot apply per-node hooks"):
        TorchRunner({}, NodeHooks(post=lambda _call, values: values))
    settings = TorchRunner({}).describe_settings()  # before activation: no probing needed
    assert settings["execution"] == "eager (native module)" and "anchor_dtypes" not in settings
