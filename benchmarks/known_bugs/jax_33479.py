"""JAX #33479: ``jax.jit`` constant-folds a vmapped 2-D gather wrongly.

https://github.com/jax-ml/jax/issues/33479 (XLA: openxla/xla#34260; buggy jax/jaxlib 0.8.1,
fixed in 0.8.2 per jaxleyverse/jaxley#809). When every input of a vmapped gather is a
constant captured by the jitted function, XLA's constant folding of the batched gather
reads the wrong rows. Prints the relative L2 of ``jit`` against a float64 NumPy reference;
exits 0 when the bug shows (relative L2 > 1e-6), 1 otherwise.
"""

from __future__ import annotations

import functools
import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

THRESHOLD = 1e-6  # exact float32 here; the bug moves values by O(1)


def main() -> int:
    """Run the buggy case; exit 0 when the bug shows."""
    rng = np.random.default_rng(0)
    data = rng.standard_normal((4, 6)).astype(np.float32)
    table = jnp.asarray(data)

    def getter(x: jax.Array, index: jax.Array) -> jax.Array:
        return x[index]

    def sliced() -> jax.Array:
        index = jnp.arange(table.shape[1])
        return jax.vmap(functools.partial(getter, index=index))(table) * 2.0 + 1.0

    ref = data.astype(np.float64) * 2.0 + 1.0
    jitted = np.asarray(jax.jit(sliced)(), dtype=np.float64)
    eager = np.asarray(sliced(), dtype=np.float64)
    rel = float(np.linalg.norm(jitted - ref) / np.linalg.norm(ref))
    rel_eager = float(np.linalg.norm(eager - ref) / np.linalg.norm(ref))
    print(f"jax {jax.__version__}: jit of a vmapped gather over a constant, rel L2 vs fp64: "
          f"jit {rel:.3g}, eager {rel_eager:.3g}")  # fmt: skip
    print(f"RESULT {rel:.3g}")
    return 0 if rel > THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
