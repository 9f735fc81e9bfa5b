"""TensorFlow, imported without the optional packages its import pulls in and anpred never runs.

``import tensorflow`` (2.21) also imports, each inside a ``try`` that tolerates its absence:

- ``keras.src.optimizers``, "an eager load for Keras' code" so that optimizers register
  with the SavedModel registry (``tensorflow/__init__.py``);
- ``jax``, for TFLite's JAX conversion (``tensorflow/lite/python/util.py``: ``from jax
  import jit``), whenever JAX is installed in the same environment, as it is here.

The TensorFlow participant runs ONNX graphs through ``tf.function`` and ``tf.nn`` /
``tf.math`` kernels (:mod:`anpred.translate.tensorflow`); it saves no model and converts
nothing to TFLite. :func:`import_tensorflow` marks those packages as absent
(``sys.modules[name] = None``, which makes their import raise ``ImportError`` at once) for the
duration of the import only, then unmarks them: a later ``import jax`` or ``tf.keras`` in
the same process imports them as usual. ``benchmarks/bench_imports.py`` on the 2-core
development machine: ``import tensorflow`` 5.79 s wall (median of 5), 3.59 s this way (0.62x,
2.2 s less), which every TensorFlow worker pays once (a run in chunks once per chunk).
"""

from __future__ import annotations

import sys
from types import ModuleType

#: Imported by ``import tensorflow`` under a ``try``, never used by the TensorFlow participant.
SKIPPED = ("keras.src.optimizers", "jax")


def import_tensorflow() -> ModuleType:
    """``import tensorflow`` without :data:`SKIPPED` (see the module docstring); returns it.

    A package of :data:`SKIPPED` that the process imported already is left alone; so is
    TensorFlow when it is imported already.
    """
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    marked = [name for name in SKIPPED if name not in sys.modules]
    for name in marked:
        sys.modules[name] = None  # type: ignore[assignment]  # "not importable", see docs
    try:
        import tensorflow
    finally:
        for name in marked:
            if sys.modules.get(name, object()) is None:
                del sys.modules[name]
    return tensorflow


tf = import_tensorflow()
"""The ``tensorflow`` module (this module imports it: import it in a worker only)."""
