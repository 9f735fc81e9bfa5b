"""Model weights: seeded generation (with BatchNorm recalibration) or a user checkpoint.

Seeded weights are generated once per (model, seed) and cached as a state_dict, so every
worker process loads bit-identical parameters. For models with BatchNorm, the running
statistics are recalibrated on the bundled real photographs (one pass in train mode with
cumulative averaging) so that activations have realistic scales. For models with layer
scales (ConvNeXt), torchvision initialises every scale to 1e-6, which turns each residual
block into an identity (a fault inside a block then moves its output by ~1e-6 of its
size); the scales are instead calibrated on the same photographs so that every residual
branch has the RMS of its block's input, as branches and residual stream have in trained
networks.

Checkpoints are loaded safely: ``torch.load(weights_only=True)``; an ultralytics
checkpoint (a dict holding a pickled model) is accepted only when every global it needs
is a module or container *class* from ``torch`` or ``ultralytics``, which are then
allow-listed for that load (never a function: the unpickler would call it).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from anpred.cache import cache_dir, file_digest
from anpred.errors import WeightsError
from anpred.zoo.registry import get_model

#: Number of bundled photographs used to recalibrate BatchNorm statistics.
CALIBRATION_IMAGES = 8


def has_batchnorm(model: Any) -> bool:
    """Return whether ``model`` contains a BatchNorm layer."""
    import torch

    return any(isinstance(m, torch.nn.modules.batchnorm._BatchNorm) for m in model.modules())


def calibration_batch(name: str) -> tuple[Any, str]:
    """Return the preprocessed calibration batch for a zoo model and where it came from."""
    import numpy as np
    import torch

    from anpred.errors import UsageError
    from anpred.inputs.images import sample_images, synthetic_images
    from anpred.inputs.preprocess import preprocess

    spec = get_model(name)
    try:
        images, source = sample_images(CALIBRATION_IMAGES), "bundled photographs"
    except UsageError:
        images, source = synthetic_images(CALIBRATION_IMAGES, seed=0), "synthetic images"
    arrays = [preprocess(img, spec.preprocessing, spec.input_size) for img in images]
    return torch.from_numpy(np.concatenate(arrays)), f"{len(images)} {source}"


def recalibrate_batchnorm(model: Any, batch: Any) -> None:
    """Set BatchNorm running statistics to those of ``batch`` (other layers stay in eval)."""
    import torch

    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    model.eval()
    for norm in norms:
        norm.reset_running_stats()
        norm.momentum = None
        norm.train()
    with torch.no_grad():
        model(batch)
    model.eval()


def layer_scale_blocks(model: Any) -> list[Any]:
    """Residual blocks with a ``layer_scale`` parameter and a ``block`` branch (ConvNeXt)."""
    import torch

    return [
        m
        for m in model.modules()
        if isinstance(getattr(m, "layer_scale", None), torch.nn.Parameter)
        and isinstance(getattr(m, "block", None), torch.nn.Module)
    ]


def calibrate_layer_scales(model: Any, batch: Any) -> None:
    """Set each block's layer scale so that its residual branch has its input's RMS.

    One forward pass: a pre-hook records each block's input; a hook on its branch sets
    ``layer_scale`` (all channels alike) to ``rms(input) / rms(branch output)`` before the
    block multiplies by it, so later blocks see the calibrated earlier ones.
    """
    import torch

    handles = []
    for block in layer_scale_blocks(model):
        seen: dict[str, Any] = {}

        def remember(_module: Any, args: tuple[Any, ...], seen: dict[str, Any] = seen) -> None:
            seen["input"] = args[0]

        def scale(
            _module: Any, _args: Any, out: Any, block: Any = block, seen: dict[str, Any] = seen
        ) -> None:
            rms_in = seen["input"].detach().pow(2).mean().sqrt()
            rms_branch = out.detach().pow(2).mean().sqrt()
            block.layer_scale.data.fill_(float(rms_in / rms_branch.clamp_min(1e-12)))

        handles.append(block.register_forward_pre_hook(remember))
        handles.append(block.block.register_forward_hook(scale))
    try:
        with torch.no_grad():
            model.eval()(batch)
    finally:
        for handle in handles:
            handle.remove()


def zero_layers(model: Any) -> list[Any]:
    """Linear and convolution layers whose weight is all zero (a constant output)."""
    import torch

    kinds = (torch.nn.Linear, torch.nn.modules.conv._ConvNd)
    return [m for m in model.modules() if isinstance(m, kinds) and not m.weight.any()]


def redraw_zero_layers(model: Any) -> None:
    """Draw zero-initialised layer weights from N(0, 1/fan_in) (torch's current RNG)."""
    import torch

    with torch.no_grad():
        for layer in zero_layers(model):
            fan_in = layer.weight[0].numel()
            layer.weight.normal_(0.0, fan_in**-0.5)


def _weights_tag(model: Any, seed: int) -> str:
    """Identifier of the seeded recipe (it names the cache file and keys the exports)."""
    return (
        f"seed{seed}"
        + ("-ls1" if layer_scale_blocks(model) else "")
        + ("-z1" if zero_layers(model) else "")
    )


def seeded_state(name: str, seed: int) -> Path:
    """Return the cached state_dict of zoo model ``name`` generated from ``seed``."""
    import torch

    torch.manual_seed(seed)
    model = get_model(name).build()
    path = cache_dir("weights") / f"{name}-{_weights_tag(model, seed)}.pt"
    if path.exists():
        return path
    redraw_zero_layers(model)
    batchnorm, layer_scales = has_batchnorm(model), bool(layer_scale_blocks(model))
    if batchnorm or layer_scales:
        batch, _ = calibration_batch(name)
        if batchnorm:
            recalibrate_batchnorm(model, batch)
        if layer_scales:
            calibrate_layer_scales(model, batch)
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)
    return path


def _safe_load(path: Path) -> Any:
    import torch
    from torch.serialization import get_unsafe_globals_in_checkpoint, safe_globals

    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as first_error:
        try:
            needed = get_unsafe_globals_in_checkpoint(str(path))
        except Exception:
            raise WeightsError(
                f"{str(path)!r} is not a torch checkpoint ({first_error.__class__.__name__})"
            ) from None
        allowed = {g: _allowed_class(g) for g in needed}
        foreign = [g for g, cls in allowed.items() if cls is None]
        if foreign:
            raise WeightsError(
                f"{str(path)!r} needs objects anpred will not unpickle ({', '.join(foreign[:3])}); "
                "save a plain state_dict with torch.save(model.state_dict(), path)"
            ) from None
        with safe_globals([cls for cls in allowed.values() if cls is not None]):
            try:
                return torch.load(path, map_location="cpu", weights_only=True)
            except Exception as err:  # torch's messages span many lines: keep one
                reason = " ".join(str(err).split())[:300] or err.__class__.__name__
                raise WeightsError(f"cannot load {str(path)!r} safely: {reason}") from None


#: Packages whose classes an ultralytics checkpoint may name (a pickled model).
_TRUSTED_PACKAGES = ("torch", "ultralytics", "collections")


def _allowed_class(qualified: str) -> Any:
    """The class a checkpoint names, when anpred may let the unpickler build it; else ``None``.

    Only *classes* from :data:`_TRUSTED_PACKAGES` that are modules or plain containers
    (what a pickled ultralytics model holds) qualify. Functions never do, even from torch:
    the unpickler calls a global with arguments from the file, and ``torch.save``,
    ``torch.hub.load`` or ``torch.utils.cpp_extension.load_inline`` called that way write
    files or run code.
    """
    import types

    import torch

    if qualified.split(".")[0] not in _TRUSTED_PACKAGES:
        return None
    obj = _resolve(qualified)
    if not isinstance(obj, type) or obj.__module__.split(".")[0] not in _TRUSTED_PACKAGES:
        return None
    if issubclass(obj, torch.nn.Module | dict | types.SimpleNamespace):
        return obj
    return None


def _resolve(qualified: str) -> Any:
    import importlib

    module, _, attr = qualified.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError):
        return None


def _state_dict_of(obj: Any) -> dict[str, Any]:
    import torch

    if isinstance(obj, dict):
        for key in ("ema", "model", "state_dict"):
            if obj.get(key) is not None:
                return _state_dict_of(obj[key])
        if all(isinstance(v, torch.Tensor) for v in obj.values()):
            return obj
    if isinstance(obj, torch.nn.Module):
        return obj.float().state_dict()
    raise WeightsError("checkpoint holds no state_dict or model")


def load_model(name: str, weights: str | None = None, seed: int = 0) -> tuple[Any, str]:
    """Build zoo model ``name`` with seeded or user weights, in eval mode, float32.

    Args:
        name: Zoo model name.
        weights: Path of a checkpoint (torch state_dict or ultralytics checkpoint), or
            ``None`` for deterministic weights generated from ``seed``.
        seed: Seed of the generated weights.

    Returns:
        The model and a weights identifier (``seed0``; ``seed0-ls1`` for models whose
        layer scales are calibrated; or ``sha256:<digest>``).

    Raises:
        WeightsError: When the checkpoint is unreadable or does not fit the architecture.
    """
    model = get_model(name).build()
    if weights is None:
        path, weights_id = seeded_state(name, seed), _weights_tag(model, seed)
    else:
        path = Path(weights)
        if not path.is_file():
            raise WeightsError(f"weights file {weights!r} does not exist")
        weights_id = f"sha256:{file_digest(path)}"
    state = _state_dict_of(_safe_load(path))
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        first = str(err).splitlines()[1].strip() if "\n" in str(err) else str(err)
        raise WeightsError(f"checkpoint {str(path)!r} does not fit {name}: {first[:200]}") from None
    return model.eval().float(), weights_id
