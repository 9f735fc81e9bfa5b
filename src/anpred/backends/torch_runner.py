"""PyTorch: the native module with anchors captured by forward hooks.

For a user's ONNX file (no native module) torch runs the graph through anpred's torch
translators instead: :meth:`TorchRunner.for_job` chooses :class:`TorchGraphRunner` once,
before activation. Settings: ``dtype`` (``"float64"`` gives the fp64 reference),
``compile`` (``torch.compile``, inductor), ``autocast`` (``"bfloat16"``:
``torch.autocast(device_type="cpu", dtype=torch.bfloat16)``), ``threads``, ``env``, and
``emulate`` / ``emulate_scope`` (a float64 run that rounds to a reduced format: the ideal
reference of a precision class, :mod:`anpred.translate.torch.emulation`).

``torch.compile`` and hooks: dynamo does not guard on forward hooks added to a module
after it was compiled (``torch._dynamo.config.skip_nnmodule_hook_guards`` is ``True`` by
default), so a recorder attached per call — what eager runs do — silently records nothing
under compile. The compiled participant therefore compiles modules whose hooks exist
before compilation: the anchored wrapper of :func:`anpred.interchange.anchored.anchored_module`
(anchors become graph outputs), a hook-free copy of the model for the plain output, and,
for stage isolation, a copy whose hooks replace anchor outputs with fed tensors.
"""

from __future__ import annotations

import copy
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, ExitStack
from typing import Any, final

import numpy as np
import torch

from anpred.backends.base import Capture, ModelJob, NodeHooks, Runner, Step
from anpred.backends.registry import register_runner
from anpred.backends.translated_runner import TranslatedRunner
from anpred.errors import UsageError
from anpred.interchange.anchored import (
    PlainOutput,
    anchor_keys,
    anchored_module,
    final_output,
    flatten_tensors,
)
from anpred.translate.process_env import check_process_env
from anpred.translate.torch.emulation import RoundingMode, check_emulation, round_weights
from anpred.zoo.spec import OUTPUT_ANCHOR, Anchor

#: ``autocast`` setting values → the CPU autocast dtype.
AUTOCAST_DTYPES = {"bfloat16": torch.bfloat16}
#: Settings the torch translators (user ONNX files) understand.
ADAPTER_SETTINGS = ("dtype", "compile", "autocast", "env", "emulate", "emulate_scope")


class _Isolating(torch.nn.Module):
    """Forward hooks that record every anchor and replace the fed ones (stage isolation).

    ``forward(x, *fed)`` takes the fed anchor values in the order of ``replaced`` and
    returns ``(final output, *anchor tensors)``; every anchor tensor is the value its
    module computed (before replacement), so it holds only the error of its own stage.
    """

    def __init__(
        self, model: torch.nn.Module, anchors: Sequence[Anchor], replaced: Sequence[str]
    ) -> None:
        super().__init__()
        self.model = model
        self.anchors = list(anchors)
        self.replaced = list(replaced)
        self.slots: dict[str, torch.Tensor] = {}
        self.records: dict[str, Any] = {}
        self.keys: list[str] = []
        modules = dict(model.named_modules())
        self._handles = [
            modules[a.module].register_forward_hook(self._hook(a.name)) for a in self.anchors
        ]

    def _hook(self, name: str) -> Any:
        def replace(_module: Any, _inputs: Any, output: Any) -> Any:
            self.records[name] = output
            if isinstance(output, torch.Tensor) and name in self.slots:
                return self.slots[name]
            return None

        return replace

    def remove(self) -> None:
        """Remove the hooks from the model."""
        for handle in self._handles:
            handle.remove()

    def forward(self, x: torch.Tensor, *fed: torch.Tensor) -> tuple[torch.Tensor, ...]:
        self.slots = dict(zip(self.replaced, fed, strict=True))
        self.records = {}
        output = final_output(self.model(x))
        captured: dict[str, Any] = {}
        for anchor in self.anchors:
            tensors = flatten_tensors(self.records.get(anchor.name))
            captured.update(zip(anchor_keys(anchor, len(tensors)), tensors, strict=True))
        self.keys = [OUTPUT_ANCHOR, *captured]
        return (output, *captured.values())


class NativeExecution:
    """A torch module run natively: anchored, plain and stage-isolated forwards.

    Args:
        model: The module, in eval mode and in the compute dtype.
        anchors: The anchors (those without a module path are skipped; the final output
            is always captured).
        dtype: The dtype inputs and fed anchors are converted to.
        compile: ``torch.compile`` (inductor, static shapes) the three forwards.
        autocast: ``None`` or ``"bfloat16"`` (``torch.autocast`` on CPU around each call).
        emulate: ``None``, or the format every operator's result is rounded to
            (:class:`~anpred.translate.torch.emulation.RoundingMode`, scope ``all`` or
            ``matmul``; the ``weights`` scope is applied to the model before).
        emulate_scope: The rounding mode's scope.

    Raises:
        UsageError: On an unknown autocast dtype, or autocast with a float64 model.
    """

    def __init__(
        self,
        model: torch.nn.Module,
        anchors: Sequence[Anchor],
        dtype: torch.dtype = torch.float32,
        compile: bool = False,
        autocast: str | None = None,
        emulate: str | None = None,
        emulate_scope: str = "all",
    ) -> None:
        if autocast is not None and autocast not in AUTOCAST_DTYPES:
            raise UsageError(
                f"torch autocast must be one of {sorted(AUTOCAST_DTYPES)} or None, not {autocast!r}"
            )
        if autocast is not None and dtype != torch.float32:
            raise UsageError("torch autocast needs a float32 model")
        self.anchors = [a for a in anchors if a.module]
        self.dtype = dtype
        self.compiled = compile
        self.autocast = autocast
        self.emulate = emulate
        self.emulate_scope = emulate_scope
        self.dtypes_seen: Counter[str] = Counter()
        # Copies first: deepcopy would copy the anchored wrapper's hooks too.
        self._spare = copy.deepcopy(model) if compile else None
        plain = copy.deepcopy(model) if compile else model
        self.model = model
        self._anchored_module = anchored_module(model, self.anchors)
        self._anchored = self._wrap(self._anchored_module)
        self._plain = self._wrap(PlainOutput(plain))
        self._isolating: tuple[_Isolating, Any] | None = None

    def _wrap(self, module: torch.nn.Module) -> Any:
        return torch.compile(module, dynamic=False) if self.compiled else module

    def _context(self) -> AbstractContextManager[Any]:
        stack = ExitStack()
        stack.enter_context(
            torch.autocast(
                "cpu",
                dtype=AUTOCAST_DTYPES.get(self.autocast, torch.bfloat16),
                enabled=self.autocast is not None,
            )
        )
        if self.emulate is not None and self.emulate_scope != "weights":
            stack.enter_context(RoundingMode(self.emulate, self.emulate_scope))
        return stack

    def _tensor(self, array: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(array)).to(self.dtype)

    def _numpy(self, tensor: torch.Tensor) -> np.ndarray:
        tensor = tensor.detach().cpu()
        self.dtypes_seen[str(tensor.dtype).replace("torch.", "")] += 1
        if tensor.dtype in (torch.bfloat16, torch.float16):
            tensor = tensor.to(torch.float32)  # exact
        return tensor.numpy()

    def _capture(self, keys: Sequence[str], values: Sequence[torch.Tensor]) -> dict[str, Any]:
        return {k: self._numpy(v) for k, v in zip(keys, values, strict=True)}

    def anchored(self, feed: np.ndarray) -> dict[str, np.ndarray]:
        """Run with anchors exposed; return {anchor key: array}, final output as ``output``."""
        x = self._tensor(feed)  # outside the context: an ideal reference rounds no input
        with torch.no_grad(), self._context():
            values = self._anchored(x)
        return self._capture(self._anchored_module.keys, values)

    def plain(self, feed: np.ndarray) -> np.ndarray:
        """Run without anchors; return the final output."""
        x = self._tensor(feed)
        with torch.no_grad(), self._context():
            return self._numpy(self._plain(x))

    def isolated(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> dict[str, Any]:
        """Stage isolation: return what every anchor's module computed.

        Every single-tensor anchor named in ``anchors`` replaces its module's output
        downstream, so each anchor holds only the error its own stage introduces.
        """
        replaced = [a.name for a in self.anchors if a.name in anchors]
        if self.compiled:
            if self._isolating is None:
                assert self._spare is not None
                module = _Isolating(self._spare, self.anchors, replaced)
                self._isolating = (module, torch.compile(module, dynamic=False))
            module, run = self._isolating
            if module.replaced != replaced:
                raise RuntimeError("stage isolation must feed the same anchors every time")
        else:
            module = _Isolating(self.model, self.anchors, replaced)
            run = module
        fed = [self._tensor(anchors[name]) for name in replaced]
        x = self._tensor(feed)
        try:
            with torch.no_grad(), self._context():
                values = run(x, *fed)
        finally:
            if not self.compiled:
                module.remove()
        return self._capture(module.keys, values)


def _dtype(settings: Mapping[str, Any]) -> torch.dtype:
    return torch.float64 if settings.get("dtype") == "float64" else torch.float32


def _describe(
    settings: Mapping[str, Any], env: Mapping[str, str], execution: str
) -> dict[str, Any]:
    """The settings both torch runners describe first; ``execution``: how the model runs."""
    return {
        "dtype": str(_dtype(settings)).replace("torch.", ""),
        "threads": torch.get_num_threads(),
        "compile": bool(settings.get("compile", False)),
        "autocast": settings.get("autocast"),
        **(
            {"emulate": settings["emulate"], "emulate_scope": settings.get("emulate_scope", "all")}
            if settings.get("emulate")
            else {}
        ),
        "env": dict(env),
        "execution": execution,
    }


def _describe_compile(described: dict[str, Any], compiled: str) -> dict[str, Any]:
    """Add what ``compile`` compiled (``compiled``) and the autocast facts."""
    if described["compile"]:
        described["compile_backend"] = "inductor"
        described["compiled"] = compiled
    if described["autocast"] is not None:
        described["autocast_device"] = "cpu"
        check = getattr(torch.ops.mkldnn, "_is_mkldnn_bf16_supported", None)  # not in torch 2.0
        described["mkldnn_bf16_supported"] = bool(check()) if check is not None else None
    return described


@register_runner("torch")
@final
class TorchRunner(Runner):
    """Native torch execution; settings: ``dtype``, ``compile``, ``autocast``, ``threads``."""

    library = "torch"
    #: The native execution (set at activation).
    native: NativeExecution | None = None

    def __init__(
        self, settings: Mapping[str, Any] | None = None, hooks: NodeHooks | None = None
    ) -> None:
        super().__init__(settings, hooks)
        self.env: dict[str, str] = {}

    @classmethod
    def for_job(cls, job: ModelJob) -> type[Runner]:
        """The native module for zoo models and users' modules; the torch translators for an
        ONNX file.
        """
        native = job.zoo_model is not None or job.module is not None
        return cls if native else TorchGraphRunner

    @property
    def dtype(self) -> torch.dtype:
        """Compute dtype."""
        return _dtype(self.settings)

    def activate_impl(self, job: ModelJob) -> None:
        torch.set_num_threads(self.threads)
        self.env = check_process_env("torch", self.settings.get("env"))
        if job.zoo_model is None and job.module is None:
            raise UsageError("the native torch runner needs a zoo model or a module (see for_job)")
        from anpred.interchange.user_module import load_user_module
        from anpred.zoo.weights import load_model

        emulate, scope = check_emulation(self.settings)
        if job.module is not None:  # a user's module, with the state its export saved
            model, weights_id = load_user_module(job.export.folder)
        else:
            assert job.zoo_model is not None
            model, weights_id = load_model(job.zoo_model, job.weights, job.seed)
        exported = job.export.weights_id
        if exported is not None and exported != weights_id:
            raise UsageError(
                f"this run's export has weights {exported}, but this anpred builds "
                f"{weights_id} (the seeded-weights recipe changed); start a new run directory"
            )
        anchors = {}
        for record in job.export.anchors:
            if record.module:
                anchors[record.anchor] = Anchor(record.anchor, record.module, record.group)
        model = model.to(self.dtype).eval()
        if emulate is not None and scope == "weights":
            round_weights(model, emulate)
        self.native = NativeExecution(
            model,
            list(anchors.values()),
            self.dtype,
            bool(self.settings.get("compile", False)),
            self.settings.get("autocast"),
            emulate,
            scope,
        )
        if self.native.compiled:  # compile now, so that a failure is a compile symptom
            self.step = Step.COMPILE
            start = time.perf_counter()
            warm = np.zeros(job.export.input_shape, dtype=np.float32)
            self.native.anchored(warm)
            self.native.plain(warm)
            self.native.dtypes_seen.clear()
            self._timed("compile", start)

    @property
    def activated(self) -> NativeExecution:
        """The native execution of the activated job."""
        if self.native is None:
            raise RuntimeError("runner is not activated")
        return self.native

    def _arrays(self, captured: Mapping[str, np.ndarray]) -> Capture:
        keys = [a.key for a in self.job.export.anchors]
        missing = [k for k in keys if k not in captured]
        if missing:
            raise RuntimeError(f"anchors not captured: {missing}")
        return Capture({k: captured[k] for k in keys})

    def infer_impl(self, feed: np.ndarray) -> Capture:
        return self._arrays(self.activated.anchored(feed))

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        return self.activated.plain(feed)

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        return self._arrays(self.activated.isolated(feed, anchors))

    def version(self) -> str:
        return torch.__version__

    def describe_settings(self) -> dict[str, Any]:
        """Settings as run: dtype, threads, how the model executes, compile and autocast.

        ``anchor_dtypes`` counts the dtypes of the tensors captured so far (autocast
        leaves anchors in bfloat16 where it really computed in bfloat16);
        ``mkldnn_bf16_supported`` is whether oneDNN has native bf16 instructions here
        (without them torch still computes in bfloat16, emulated, several times slower).
        """
        compile = bool(self.settings.get("compile", False))
        described = _describe(
            self.settings,
            self.env,
            "torch.compile (inductor) of the anchored module"
            if compile
            else "eager (native module)",
        )
        described = _describe_compile(
            described,
            "anchored wrapper (hooks registered before compile), hook-free plain copy, "
            "isolation copy",
        )
        if self.native is not None:
            described["anchor_dtypes"] = dict(self.native.dtypes_seen)
        return described


@final
class TorchGraphRunner(TranslatedRunner):
    """torch for a user's ONNX file: the graph through anpred's torch translators.

    Settings as :class:`TorchRunner`'s (``threads`` sets torch's threads; the others go to
    the translators' adapter). Chosen by :meth:`TorchRunner.for_job`.
    """

    library = "torch"

    def __init__(
        self, settings: Mapping[str, Any] | None = None, hooks: NodeHooks | None = None
    ) -> None:
        super().__init__(settings, hooks)
        self.env: dict[str, str] = {}

    def adapter_settings(self) -> dict[str, Any]:
        return {k: self.settings[k] for k in ADAPTER_SETTINGS if k in self.settings}

    def activate_impl(self, job: ModelJob) -> None:
        torch.set_num_threads(self.threads)
        self.env = check_process_env("torch", self.settings.get("env"))
        super().activate_impl(job)

    def version(self) -> str:
        return torch.__version__

    def describe_settings(self) -> dict[str, Any]:
        """Settings as run (see :meth:`TorchRunner.describe_settings`), plus the adapter's.

        The float64 reference that fell back to ONNX's evaluator says so in ``execution``
        (and in the adapter's ``reference_source`` and ``fallback_reason``).
        """
        execution = "anpred torch translators"
        if self.program is not None and self.program.library == "evaluator_reference":
            execution = "onnx.reference.ReferenceEvaluator (float64 fallback)"
        described = _describe(self.settings, self.env, execution)
        if self.program is not None:
            described.update(
                {k: v for k, v in self.program.adapter.settings().items() if k not in described}
            )
        return _describe_compile(described, "the translated graph, traced with make_fx")
