"""A user's own torch module: where it comes from, its inputs, and how a worker gets it back.

A run's ``model`` names a user's module in one of two ways (a *module source*):

* ``path/to/file.py:function``: a function returning the module, or ``(module,
  example_inputs)``; it is called with torch seeded by ``--seed``.
* ``path/to/file.pt``: a module saved whole with ``torch.save`` (unpickled: trusted code,
  as a ``.py`` file is); ``anpred.run(module, example_inputs=...)`` saves a module object
  this way, as ``{"module": module, "example_inputs": example_inputs}``.

``example_inputs`` is a tensor, a tuple of tensors (positional inputs) or a dict of named
tensors (keyword inputs); without them ``--input-shape`` gives float32 inputs.

The export job builds the module once (:mod:`anpred.interchange.module_export`) and writes
its ``state_dict`` and a :class:`ModuleRecord` next to the export; every torch worker
rebuilds it from its source and loads that state (:func:`load_user_module`), so every
process holds the same weights even where the function draws them unseeded. The module
runs in eval mode and float32, as the zoo's models do (the fp64 reference converts it).

Importing this module imports no DL library: the parts a driver needs
(:func:`is_module_source`, :func:`check_module_source`) run without torch.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import re
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anpred.errors import UsageError
from anpred.interchange.module_bundle import SAVED_SUFFIX, add_class_folders

#: ``path/to/file.py:function``.
_BUILDER = re.compile(r"^(?P<file>.+\.py):(?P<function>[A-Za-z_][A-Za-z0-9_]*)$")
#: Name of a single positional input (a tensor given as ``example_inputs``).
SINGLE_INPUT = "input"
#: Files the export writes next to the graphs.
RECORD_FILE, STATE_FILE = "module.json", "module_state.pt"
#: The module's parameters in order, as NumPy arrays (ports compare theirs to them).
PARAMETERS_FILE = "module_parameters.npz"


def is_module_source(model: str) -> bool:
    """Whether ``model`` names a user's torch module (``file.py:function`` or ``file.pt``)."""
    return bool(_BUILDER.match(model)) or model.endswith(SAVED_SUFFIX)


def is_onnx_path(model: str) -> bool:
    """Whether ``model`` names an ONNX file rather than a zoo model or a torch module."""
    if is_module_source(model):
        return False
    return model.endswith(".onnx") or os.sep in model


def check_module_source(model: str) -> Path:
    """The file of a module source (no torch needed).

    Raises:
        UsageError: The file does not exist.
    """
    match = _BUILDER.match(model)
    path = Path(match.group("file") if match else model)
    if not path.is_file():
        raise UsageError(f"{str(path)!r} does not exist (model {model!r})")
    return path


def resolved_source(model: str) -> str:
    """``model`` with its file's absolute path (workers may start elsewhere)."""
    match = _BUILDER.match(model)
    if match:
        return f"{Path(match.group('file')).resolve()}:{match.group('function')}"
    return str(Path(model).resolve())


@dataclass(frozen=True)
class InputSpec:
    """One input of the module, as its example gave it.

    Attributes:
        name: Input name (a dict key, ``input``, or ``input0``, ``input1``...).
        shape: Its shape.
        dtype: Its dtype name (floating inputs are float32).
        span: ``(min, max)`` of an integer example (token ids, class indices), the default
            range of the run's seeded values of that input; ``None`` for floats.
    """

    name: str
    shape: tuple[int, ...]
    dtype: str
    span: tuple[int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        data = {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}
        return {**data, "span": list(self.span)} if self.span is not None else data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> InputSpec:
        """Inverse of :meth:`to_dict`."""
        span = data.get("span")
        return cls(
            str(data["name"]),
            tuple(int(d) for d in data["shape"]),
            str(data["dtype"]),
            (int(span[0]), int(span[1])) if span is not None else None,
        )


@dataclass(frozen=True)
class ModuleRecord:
    """How a worker rebuilds the module the export was made from (``module.json``).

    Attributes:
        source: The module source, with an absolute path.
        seed: Seed torch had when the module was built.
        inputs: The module's inputs, in call order.
        keywords: Whether the module takes them by name (a dict of example inputs).
        weights_id: ``sha256:<digest>`` of the source file and the state (it keys cached
            calibrations, as a zoo model's weights id does).
        source_digest: SHA-256 of the source file when the module was exported.
    """

    source: str
    seed: int
    inputs: tuple[InputSpec, ...]
    keywords: bool
    weights_id: str
    source_digest: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "source": self.source,
            "seed": self.seed,
            "inputs": [i.to_dict() for i in self.inputs],
            "keywords": self.keywords,
            "weights_id": self.weights_id,
            "source_digest": self.source_digest,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ModuleRecord:
        """Inverse of :meth:`to_dict`."""
        return cls(
            str(data["source"]),
            int(data["seed"]),
            tuple(InputSpec.from_dict(i) for i in data["inputs"]),
            bool(data["keywords"]),
            str(data["weights_id"]),
            str(data["source_digest"]),
        )


def _import_file(path: Path) -> Any:
    """Import ``path`` as a module (its folder first on ``sys.path``, for its own imports)."""
    folder = str(path.parent)
    if folder not in sys.path:
        sys.path.insert(0, folder)
    name = f"anpred_user_{hashlib.sha256(str(path).encode()).hexdigest()[:8]}_{path.stem}"
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UsageError(f"cannot import {str(path)!r}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as err:
        del sys.modules[name]
        raise UsageError(f"importing {path.name} failed: {_one_line(err)}") from None
    return module


def source_function(source: str) -> Any:
    """The function ``path/to/file.py:function`` names (the file imported by path).

    Raises:
        UsageError: No such file or function, or the file fails to import.
    """
    match = _BUILDER.match(source)
    if not match:
        raise UsageError(f"{source!r} is not path/to/file.py:function")
    path, name = check_module_source(source), match.group("function")
    function = getattr(_import_file(path), name, None)
    if not callable(function):
        raise UsageError(f"{path.name} has no function {name!r}")
    return function


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{err.__class__.__name__}: {text[:300]}" if text else err.__class__.__name__


def _built(source: str, seed: int) -> tuple[Any, Any]:
    """Build the module a source names; return it and its example inputs (or ``None``)."""
    import torch

    torch.manual_seed(seed)
    match = _BUILDER.match(source)
    if match:
        path, name = check_module_source(source), match.group("function")
        function = source_function(source)
        try:
            built = function()
        except UsageError:
            raise
        except Exception as err:
            raise UsageError(f"{path.name}:{name}() failed: {_one_line(err)}") from None
    else:
        path = check_module_source(source)
        add_class_folders(path)
        try:
            built = torch.load(path, map_location="cpu", weights_only=False)
        except Exception as err:
            raise UsageError(
                f"cannot load the module saved in {path.name}: {_one_line(err)} (a class defined "
                "in a notebook or a script's __main__ cannot be imported by anpred's worker "
                "processes: define it in a .py file, or install cloudpickle)"
            ) from None
    example = None
    if isinstance(built, Mapping) and "module" in built:
        built, example = built["module"], built.get("example_inputs")
    elif isinstance(built, tuple) and len(built) == 2:
        built, example = built
    if not isinstance(built, torch.nn.Module):
        raise UsageError(
            f"{source} gave a {type(built).__name__}, not a torch.nn.Module "
            "(or a (module, example_inputs) pair)"
        )
    return built, example


def example_tensors(
    example: Any, input_shapes: Mapping[str | None, tuple[int, ...]], seed: int
) -> tuple[list[tuple[str, Any]], bool]:
    """The module's inputs as ``[(name, tensor)]`` and whether they go by name.

    Args:
        example: A tensor, a tuple/list of tensors, a dict of named tensors, or ``None``.
        input_shapes: ``--input-shape`` values (used when ``example`` is ``None``): float32
            inputs drawn from a normal distribution seeded by ``seed``.
        seed: The run's seed.

    Raises:
        UsageError: No example and no shapes, or an entry that is not a tensor.
    """
    import torch

    keywords = False
    if example is None:
        if not input_shapes:
            raise UsageError(
                "the module came without example inputs: return (module, example_inputs) from "
                "the function, pass example_inputs=..., or give --input-shape"
            )
        generator = torch.Generator().manual_seed(seed)
        keywords = None not in input_shapes
        pairs = [
            (name or SINGLE_INPUT, torch.randn(shape, generator=generator))
            for name, shape in input_shapes.items()
        ]
    elif isinstance(example, torch.Tensor):
        pairs = [(SINGLE_INPUT, example)]
    elif isinstance(example, Mapping):
        keywords, pairs = True, [(str(k), v) for k, v in example.items()]
    elif isinstance(example, tuple | list):
        pairs = [(f"{SINGLE_INPUT}{i}", v) for i, v in enumerate(example)]
        if len(pairs) == 1:
            pairs = [(SINGLE_INPUT, example[0])]
    else:
        raise UsageError(
            f"example_inputs must be a tensor, a tuple of tensors or a dict of named tensors, "
            f"not {type(example).__name__}"
        )
    if not pairs:
        raise UsageError("example_inputs is empty")
    bad = [name for name, value in pairs if not isinstance(value, torch.Tensor)]
    if bad:
        raise UsageError(f"example input {bad[0]} is not a tensor")
    return [(n, _as_input(v)) for n, v in pairs], keywords


def _as_input(tensor: Any) -> Any:
    """A detached CPU copy; floating point in float32 (the module runs in float32)."""
    value = tensor.detach().cpu().contiguous()
    return value.float() if value.is_floating_point() else value


def build_user_module(
    source: str, seed: int, input_shapes: Mapping[str | None, tuple[int, ...]]
) -> tuple[Any, list[tuple[str, Any]], bool]:
    """Build the module of ``source`` (eval mode, float32) with its example inputs.

    Returns:
        The module, its inputs as ``[(name, tensor)]``, and whether they go by name.
    """
    module, example = _built(source, seed)
    pairs, keywords = example_tensors(example, input_shapes, seed)
    return module.eval().float(), pairs, keywords


def input_specs(pairs: Sequence[tuple[str, Any]]) -> tuple[InputSpec, ...]:
    """The :class:`InputSpec` of each ``(name, tensor)``."""
    specs = []
    for name, t in pairs:
        integer = not t.is_floating_point() and t.numel() > 0 and str(t.dtype) != "torch.bool"
        span = (int(t.min()), int(t.max())) if integer else None
        dtype = str(t.dtype).replace("torch.", "")
        specs.append(InputSpec(name, tuple(int(d) for d in t.shape), dtype, span))
    return tuple(specs)


def example_ranges(folder: Path, bare: Sequence[float], named: Sequence[str]) -> tuple[str, ...]:
    """``NAME=LO,HI`` ranges of the integer inputs of the module exported into ``folder``
    that the user gave no range (``--input-range``): their example's min and max, so that
    seeded token ids stay inside the embedding the example was made for.
    """
    if bare or not (folder / RECORD_FILE).is_file():
        return ()
    given = {value.split("=", 1)[0].strip() for value in named}
    record = ModuleRecord.from_dict(json.loads((folder / RECORD_FILE).read_text()))
    return tuple(
        f"{i.name}={i.span[0]},{i.span[1]}"
        for i in record.inputs
        if i.span is not None and i.name not in given
    )


def save_state(
    module: Any, folder: Path, source: str, seed: int, pairs: Any, keywords: bool
) -> ModuleRecord:
    """Write the module's state and its :class:`ModuleRecord` into ``folder``."""
    import torch

    folder.mkdir(parents=True, exist_ok=True)
    state = folder / STATE_FILE
    torch.save(module.state_dict(), state)
    import numpy as np

    parameters = {n: p.detach().numpy() for n, p in module.named_parameters()}
    np.savez(folder / PARAMETERS_FILE, **parameters)  # in module order (npz keeps it)
    code = hashlib.sha256(check_module_source(source).read_bytes())
    digest = code.copy()
    digest.update(state.read_bytes())
    weights_id = f"sha256:{digest.hexdigest()[:32]}"
    record = ModuleRecord(source, seed, input_specs(pairs), keywords, weights_id, code.hexdigest())
    (folder / RECORD_FILE).write_text(json.dumps(record.to_dict(), indent=1))
    return record


def load_user_module(folder: Path) -> tuple[Any, str]:
    """Rebuild the module exported into ``folder``, with its saved state, for a worker.

    The module takes the one array every runner feeds (see :func:`fed_module`).

    Returns:
        The module (eval mode, float32) and the weights id of its export.

    Raises:
        UsageError: The source file changed since the export.
    """
    import torch

    record = ModuleRecord.from_dict(json.loads((folder / RECORD_FILE).read_text()))
    path = check_module_source(record.source)
    if hashlib.sha256(path.read_bytes()).hexdigest() != record.source_digest:
        raise UsageError(
            f"{path.name} changed since this run exported its module; start a new run directory"
        )
    module, _ = _built(record.source, record.seed)
    state = torch.load(folder / STATE_FILE, map_location="cpu", weights_only=True)
    try:
        module.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise UsageError(
            f"{record.source} no longer fits this run's export ({_one_line(err)}); "
            "start a new run directory"
        ) from None
    return fed_module(module.eval().float(), record), record.weights_id


def fed_module(module: Any, record: ModuleRecord) -> Any:
    """``module``, taking the one array a runner feeds, whatever inputs it has.

    One float input taken by position is fed as it is. Otherwise the feed is the float32
    vector the inputs are packed into (:mod:`anpred.interchange.packing`), one integer/bool
    input carried in float, or one input taken by name: the module's class is swapped for a
    subclass whose ``forward`` unpacks the feed, restores each input's dtype (floating
    inputs keep the feed's, the compute dtype) and calls the original ``forward``. The
    instance stays the same object, so module paths, hooks, ``deepcopy`` and
    ``torch.compile`` see the user's module.
    """
    import torch

    inputs = record.inputs
    one_float = len(inputs) == 1 and inputs[0].dtype.startswith(("float", "bfloat"))
    if one_float and not record.keywords:
        return module
    from anpred.interchange.packing import layout

    packed = layout([(i.name, i.shape, i.dtype) for i in inputs]) if len(inputs) > 1 else None
    names = [i.name for i in inputs] if record.keywords else []
    base = type(module)

    def forward(self: Any, feed: Any) -> Any:
        values = []
        for n, spec in enumerate(inputs):
            kind = getattr(torch, spec.dtype)
            # integers leave the float feed first (packed values are exact integers): a
            # float slice would be rounded by an ideal reduced-precision reference's
            # RoundingMode (token ids above 256 in bf16)
            if kind.is_floating_point:
                flat = feed.reshape(-1)
            else:
                flat = (feed != 0 if kind == torch.bool else feed.to(kind)).reshape(-1)
            if packed is not None:
                flat = flat[packed[n].offset : packed[n].offset + packed[n].size]
            values.append(flat.reshape(spec.shape))
        if names:
            return base.forward(self, **dict(zip(names, values, strict=True)))
        return base.forward(self, *values)

    module.__class__ = type(base.__name__, (base,), {"forward": forward})
    return module
