"""The libraries anpred ships with: one :class:`Library` entry each.

Adding a library to anpred itself means one entry here, its runner module under
``anpred/backends/``, one pip extra in ``pyproject.toml`` and one test folder
(``docs/adding-a-library.md``). Nothing here imports a DL library.
"""

from __future__ import annotations

from anpred.library.descriptor import Library, Loads
from anpred.library.precision import (
    IDEAL_PREFIX,
    Precision,
    class_emulation,
    ideal_configurations,
)

#: The precision classes whose ideal references torch computes (``torch[ideal-<class>]``:
#: the fp64 model with operator outputs rounded to the class's format).
IDEAL_CLASSES = ("bf16", "fp16", "tf32", "bf16-weights", "fp16-weights")

#: oneDNN's switch in TensorFlow; read once, when TensorFlow is imported.
_ONEDNN = "TF_ENABLE_ONEDNN_OPTS"

#: What OpenVINO's reduced-precision configurations do.
_HINT = "inference precision hint (f32 where the CPU lacks it)"

#: The builtin libraries, in display order (``--libs all`` runs them in this order).
#:
#: What each configuration really does on the machine at hand (bf16 support, fallbacks)
#: is recorded by the runner's ``describe_settings()`` in the run's results.
BUILTIN_LIBRARIES: tuple[Library, ...] = (
    Library(
        name="torch",
        distributions=("torch",),
        extra="torch",
        import_name="torch",
        runner="anpred.backends.torch_runner:TorchRunner",
        loads=Loads.NATIVE_MODULE,
        configurations={
            "": {},
            "fp64": {"dtype": "float64"},
            # torch.compile (inductor) of the module wrapped so that anchors are its outputs.
            "compile": {"compile": True},
            # torch.autocast(device_type="cpu", dtype=torch.bfloat16) around every forward.
            "bf16": {"autocast": "bfloat16"},
            # the ideal references of the reduced-precision classes (library/precision.py)
            **ideal_configurations(IDEAL_CLASSES),
        },
        switches={"compile": (False, True), "autocast": (None, "bfloat16")},
        precisions={
            "fp64": Precision("fp64"),
            "bf16": Precision(
                "bf16", "matmul", "autocast: conv/matmul in bf16, results stay bf16 downstream"
            ),
            **{
                f"{IDEAL_PREFIX}{c}": Precision(*class_emulation(c), "ideal reference (emulated)")
                for c in IDEAL_CLASSES
            },
        },
    ),
    Library(
        name="onnxruntime",
        distributions=("onnxruntime",),
        extra="onnxruntime",
        import_name="onnxruntime",
        runner="anpred.backends.onnxruntime_runner:OnnxRuntimeRunner",
        loads=Loads.ONNX_FILE,
        configurations={"": {}, **{f"O{i}": {"optimization": f"O{i}"} for i in range(4)}},
        switches={"optimization": ("O3", "O0", "O1", "O2")},
    ),
    Library(
        name="openvino",
        distributions=("openvino",),
        extra="openvino",
        import_name="openvino",
        runner="anpred.backends.openvino_runner:OpenVinoRunner",
        loads=Loads.ONNX_FILE,
        configurations={"": {}, "bf16": {"precision": "bf16"}, "f16": {"precision": "f16"}},
        # the precision hint; the runner sets no fusion switch (OpenVINO exposes none per pass)
        switches={"precision": ("f32", "bf16", "f16")},
        precisions={
            "bf16": Precision("bf16", "all", _HINT),
            "f16": Precision("fp16", "all", _HINT),
        },
    ),
    Library(
        name="tensorflow",
        distributions=("tensorflow-cpu", "tensorflow"),
        extra="tensorflow",
        import_name="tensorflow",
        runner="anpred.backends.translated_runner:TensorFlowRunner",
        loads=Loads.TRANSLATED_ONNX,
        configurations={
            "": {},
            "nchw": {"layout": "NCHW"},
            "eager": {"function": False},
            "xla": {"jit_compile": True},
            "onednn": {"env": {_ONEDNN: "1"}},
            "onednn-off": {"env": {_ONEDNN: "0"}},
            # grappler's auto_mixed_precision_onednn_bfloat16 pass; it needs oneDNN on.
            "bf16": {"mixed_precision": "bfloat16", "env": {_ONEDNN: "1"}},
        },
        precisions={"bf16": Precision("bf16", "matmul", "grappler auto mixed precision")},
        # oneDNN is on by default on x86 Linux; XLA and eager execution are the runner's
        switches={
            f"env.{_ONEDNN}": ("1", "0"),
            "jit_compile": (False, True),
            "function": (True, False),
        },
        shares_process=False,  # importing tensorflow and paddle in one process segfaults
    ),
    Library(
        name="jax",
        distributions=("jax",),
        extra="jax",
        import_name="jax",
        runner="anpred.backends.translated_runner:JaxRunner",
        loads=Loads.TRANSLATED_ONNX,
        configurations={
            "": {},
            "nojit": {"jit": False},
            # Compute dtype bfloat16 (a jmp/flax-style policy): weights and input rounded to
            # bfloat16, every op computes in it, outputs widened to float32.
            "bf16": {"dtype": "bfloat16"},
        },
        precisions={"bf16": Precision("bf16", "all", "weights, input and every op in bf16")},
        switches={"jit": (True, False)},
    ),
    Library(
        name="paddle",
        distributions=("paddlepaddle",),
        extra="paddle",
        import_name="paddle",
        runner="anpred.backends.translated_runner:PaddleRunner",
        loads=Loads.TRANSLATED_ONNX,
        # paddle.amp.auto_cast has no effect on CPU (paddle 3.3.1 says so and leaves
        # conv2d/matmul in float32), so paddle has no bf16 participant.
        configurations={"": {}, "static": {"static": True}},
        # anpred's paddle translation runs paddle's dygraph/static kernels; Paddle's oneDNN
        # passes belong to Paddle Inference (paddle_inference's switches)
        switches={"static": (False, True)},
        shares_process=False,  # importing tensorflow and paddle in one process segfaults
    ),
)
