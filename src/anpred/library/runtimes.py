"""Deployment runtimes: participants whose model is a real converter's artifact.

Each runtime converts anpred's anchored model (anchors as extra outputs) with the converter
its users use, and runs the artifact on CPU in its own worker process, usually in its own
pinned environment (``requirements/runtimes/<environment>.txt``, built by ``make runtimes``).
The runners live in ``anpred.backends.deploy`` and share
:class:`anpred.backends.converted.ConvertedRunner` (conversion as a cached, status-bearing
step; outputs mapped back to anchors by a recorded rule). Nothing here imports a DL library.

Not in ``--libs all`` (conversion costs seconds to minutes per model and configuration):
ask for them by name, or ``--libs runtimes``.
"""

from __future__ import annotations

from anpred.library.descriptor import Library, Loads
from anpred.library.precision import Precision

#: The deployment runtimes, in display order. Each runtime's entry is owned by its runner
#: module; the configuration settings are handed to that runner.
RUNTIME_LIBRARIES: tuple[Library, ...] = (
    Library(
        name="litert",
        distributions=("ai-edge-litert",),
        extra="",
        requirement="requirements/runtimes/litert.txt (make runtimes)",
        import_name="ai_edge_litert",
        runner="anpred.backends.deploy.litert:LiteRtRunner",
        loads=Loads.CONVERTED_ARTIFACT,
        configurations={"": {}, "fp16": {"precision": "fp16"}, "noxnnpack": {"xnnpack": False}},
        switches={"xnnpack": (True, False), "precision": ("fp32", "fp16")},
        precisions={"fp16": Precision("fp16", "weights", "float16 weights, float32 arithmetic")},
        environment="litert",
        converter="onnx2tf",
        converter_distributions=("onnx2tf",),
        in_all=False,
    ),
    Library(
        name="ncnn",
        distributions=("ncnn",),
        extra="",
        requirement="requirements/runtimes/torch-deploy.txt (make runtimes)",
        import_name="ncnn",
        runner="anpred.backends.deploy.ncnn:NcnnRunner",
        loads=Loads.CONVERTED_ARTIFACT,
        configurations={
            "": {},
            "fp16": {"fp16_arithmetic": True, "fp16_storage": True},
            "bf16": {"bf16_storage": True},
            "fp16-weights": {"fp16_weights": True},
        },
        precisions={
            "fp16": Precision("fp16", "all", "fp16 arithmetic and storage"),
            "bf16": Precision("bf16", "all", "bf16 storage between layers, fp32 arithmetic"),
            "fp16-weights": Precision("fp16", "weights"),
        },
        # ncnn.Option flags the runner sets (it sets no Winograd flag)
        switches={
            "fp16_storage": (False, True),
            "fp16_arithmetic": (False, True),
            "bf16_storage": (False, True),
            "fp16_weights": (False, True),
        },
        environment="torch-deploy",
        converter="pnnx",
        converter_distributions=("pnnx",),
        in_all=False,
    ),
    Library(
        name="mnn",
        distributions=("MNN",),
        extra="",
        requirement="requirements/runtimes/mnn.txt (make runtimes)",
        import_name="MNN",
        runner="anpred.backends.deploy.mnn:MnnRunner",
        loads=Loads.CONVERTED_ARTIFACT,
        configurations={
            "": {},
            "low": {"precision": "low"},
            "fp16": {"fp16_weights": True},
            # MNN's CPU backend computes 3x3 convolutions by Winograd unless told not to
            "nowinograd": {"winograd": False},
        },
        precisions={
            "low": Precision("fp16", "all", "precision hint low (fp16 where the CPU has it)"),
            "fp16": Precision("fp16", "weights", "--fp16 conversion: float16 weights"),
        },
        switches={
            "winograd": (True, False),
            "precision": ("normal", "low", "high"),
            "fp16_weights": (False, True),
        },
        environment="mnn",
        converter="MNNConvert",
        converter_distributions=("MNN",),
        in_all=False,
    ),
    Library(
        name="tvm",
        distributions=("apache-tvm",),
        extra="",
        requirement="requirements/runtimes/tvm.txt (make runtimes)",
        import_name="tvm",
        runner="anpred.backends.deploy.tvm:TvmRunner",
        loads=Loads.CONVERTED_ARTIFACT,
        # fp16: ToMixedPrecision, float16 inputs to conv/matmul, float32 accumulators
        configurations={"": {}, "fp16": {"mixed_precision": "float16", "accumulate": "float32"}},
        precisions={"fp16": Precision("fp16", "matmul", "ToMixedPrecision, fp32 accumulators")},
        switches={"mixed_precision": (None, "float16")},
        environment="tvm",
        converter="relax.frontend.onnx",
        converter_distributions=("apache-tvm",),
        in_all=False,
    ),
    Library(
        name="executorch",
        distributions=("executorch",),
        extra="",
        requirement="requirements/runtimes/torch-deploy.txt (make runtimes)",
        import_name="executorch",
        runner="anpred.backends.deploy.executorch:ExecuTorchRunner",
        loads=Loads.CONVERTED_ARTIFACT,
        configurations={"": {}, "fp16": {"dtype": "float16"}},
        precisions={"fp16": Precision("fp16", "all", "the program in float16 (XNNPACK)")},
        switches={"dtype": ("float32", "float16")},
        # shares its environment with ncnn (both need torch 2.14.1: one copy of it)
        environment="torch-deploy",
        converter="torch.export + XNNPACK",
        converter_distributions=("executorch",),
        in_all=False,
    ),
    Library(
        name="paddle_inference",
        distributions=("paddlepaddle",),
        extra="",
        requirement="requirements/runtimes/paddle_inference.txt (make runtimes)",
        import_name="paddle",
        runner="anpred.backends.deploy.paddle_inference:PaddleInferenceRunner",
        loads=Loads.CONVERTED_ARTIFACT,
        # "" is oneDNN fp32 (Paddle Inference's x86 default); noonednn: Paddle's own kernels
        configurations={"": {}, "bf16": {"precision": "bf16"}, "noonednn": {"onednn": False}},
        precisions={"bf16": Precision("bf16", "all", "oneDNN bf16 passes")},
        switches={
            "onednn": (True, False),
            "ir_optim": (True, False),
            "precision": ("fp32", "bf16"),
        },
        environment="paddle_inference",
        converter="x2paddle",
        converter_distributions=("x2paddle",),
        shares_process=False,
        in_all=False,
    ),
)
