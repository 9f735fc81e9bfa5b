"""A module object handed to ``anpred.run``, saved for the run's worker processes.

Workers are other processes: they get the module from a file. :func:`save_module` writes
``{"module", "example_inputs"}`` with ``torch.save`` to ``$ANPRED_CACHE/modules/<Class>-
<digest>.pt`` -- named by its content, so that the same module resumes the same run -- and a
sidecar ``.json`` listing the folders its classes are imported from, which
:func:`add_class_folders` puts on a worker's ``sys.path`` before it unpickles the file.
Classes are pickled by reference (the worker imports them), or by value with cloudpickle
when it is installed; a class defined in ``__main__`` (a notebook, a script) without
cloudpickle is refused in one line before anything runs.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

from anpred.errors import UsageError

#: Suffix of a module saved whole with ``torch.save``.
SAVED_SUFFIX = ".pt"


def _unimportable_classes(module: Any) -> list[str]:
    """Classes of ``module``'s tree another process cannot import by name: defined in
    ``__main__`` (a notebook, a script) or in code run without a file (``exec``).
    """
    found = set()
    for m in module.modules():
        name = type(m).__module__
        if name == "__main__" or getattr(sys.modules.get(name), "__file__", None) is None:
            found.add(type(m).__name__)
    return sorted(found)


def _class_folders(module: Any) -> list[str]:
    """Folders a worker must have on ``sys.path`` to import the classes of ``module``'s tree."""
    folders: dict[str, None] = {}
    for m in module.modules():
        top = sys.modules.get(type(m).__module__.split(".")[0])
        file = getattr(top, "__file__", None)
        if file and type(m).__module__ != "__main__":
            path = Path(file).resolve()
            folders[str(path.parent.parent if path.name == "__init__.py" else path.parent)] = None
    return list(folders)


def save_module(module: Any, example_inputs: Any) -> str:
    """Save a module object and its example inputs for a run's processes; return the path.

    The file (``$ANPRED_CACHE/modules/<Class>-<digest>.pt``, named by its content, so that
    the same module resumes the same run) holds ``{"module", "example_inputs"}`` saved with
    ``torch.save``; a sidecar ``.json`` lists the folders its classes are imported from.
    Classes are pickled by reference (workers import them), or by value with cloudpickle
    when it is installed.

    Raises:
        UsageError: A class defined in ``__main__`` without cloudpickle, or a module that
            cannot be saved.
    """
    import io

    import torch

    from anpred.cache import cache_dir

    try:
        import cloudpickle as pickler  # classes of a notebook, by value
    except ImportError:
        import pickle as pickler

        local = _unimportable_classes(module)
        if local:
            raise UsageError(
                f"the module's class {local[0]} is defined in __main__ (a notebook or a "
                "script) or without a file, so anpred's worker processes cannot import it: "
                "define it in a .py file and import it, give 'file.py:function', or install "
                "cloudpickle"
            ) from None
    buffer = io.BytesIO()
    try:
        torch.save(
            {"module": module, "example_inputs": example_inputs}, buffer, pickle_module=pickler
        )
    except Exception as err:
        raise UsageError(f"cannot save the module for anpred's workers: {_reason(err)}") from None
    data = buffer.getvalue()
    digest = hashlib.sha256(data).hexdigest()[:16]
    path = cache_dir("modules") / f"{type(module).__name__}-{digest}{SAVED_SUFFIX}"
    if not path.is_file():
        tmp = path.with_suffix(f".tmp{id(data)}")
        tmp.write_bytes(data)
        tmp.replace(path)
    path.with_suffix(".json").write_text(json.dumps({"sys_path": _class_folders(module)}))
    return str(path)


def add_class_folders(path: Path) -> None:
    """Put the folders :func:`save_module` recorded for ``path`` first on ``sys.path``."""
    sidecar = path.with_suffix(".json")
    if sidecar.is_file():
        missing = [f for f in json.loads(sidecar.read_text())["sys_path"] if f not in sys.path]
        sys.path[:0] = missing


def _reason(err: BaseException) -> str:
    text = " ".join(str(err).split())
    return f"{err.__class__.__name__}: {text[:300]}" if text else err.__class__.__name__
