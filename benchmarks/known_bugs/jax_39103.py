"""JAX #39103: ``jax.jit`` of a vmapped matrix-vector product + squared-sum is wrong on CPU.

https://github.com/jax-ml/jax/issues/39103 (a regression: jax/jaxlib 0.10.2 is wrong,
0.10.1 correct; no later release on the package index yet). With n = 32,769 rows in
float32 the jitted function returns a wrong last element (eager is exact). Prints the
relative L2 and the last element's absolute error of ``jit(f)`` against a float64 NumPy
reference; exits 0 when the bug shows (rel L2 > 1e-6), 1 otherwise.
"""

from __future__ import annotations

import os
import sys

os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402

THRESHOLD = 1e-6  # float32 rounding of the exact integers here: ~1e-8; the bug: ~1e-4
N = 32_769  # the float32 size (one row past 2**15)


def main() -> int:
    """Run the buggy case; exit 0 when the bug shows."""
    i = np.arange(N, dtype=np.float32)
    x = np.stack((i, np.zeros_like(i), np.zeros_like(i)), axis=1)
    matrix = jnp.eye(3, dtype=jnp.float32)

    def f(rows: jax.Array) -> jax.Array:
        return jax.vmap(lambda row: jnp.sum((matrix @ row) ** 2))(rows)

    ref = (x.astype(np.float64) ** 2).sum(axis=1)
    jitted = np.asarray(jax.jit(f)(jnp.asarray(x)), dtype=np.float64)
    eager = np.asarray(f(jnp.asarray(x)), dtype=np.float64)
    rel = float(np.linalg.norm(jitted - ref) / np.linalg.norm(ref))
    rel_eager = float(np.linalg.norm(eager - ref) / np.linalg.norm(ref))
    last = abs(jitted[-1] - ref[-1])
    print(f"jax {jax.__version__}: jit(vmap(matvec + squared sum)), n={N}, rel L2 vs fp64: "
          f"jit {rel:.3g} (last element off by {last:.3g}), eager {rel_eager:.3g}")  # fmt: skip
    print(f"RESULT {rel:.3g}")
    return 0 if rel > THRESHOLD else 1


if __name__ == "__main__":
    sys.exit(main())
