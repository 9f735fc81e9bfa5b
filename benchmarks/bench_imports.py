"""What a TensorFlow worker's import costs: ``import tensorflow`` against anpred's lean import.

Each round starts two fresh Python processes, one per way, in alternating order, and times
the import inside them (wall and CPU seconds). Prints every round, the medians and their
ratio, measured in the same run (:mod:`anpred.translate.tensorflow.lean_import` says what
the lean import leaves out and why). Run::

    python benchmarks/bench_imports.py [--rounds 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys

PLAIN = "import tensorflow"
LEAN = "from anpred.translate.tensorflow.lean_import import tf"
TIMED = """
import json, sys, time
wall, cpu = time.perf_counter(), time.process_time()
{statement}
print(json.dumps({{"wall": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "jax": "jax" in sys.modules, "keras": "keras" in sys.modules}}))
"""


def time_import(statement: str) -> dict[str, float]:
    """Wall and CPU seconds of ``statement`` in a fresh interpreter, and what it imported."""
    done = subprocess.run(
        [sys.executable, "-c", TIMED.format(statement=statement)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    """Time both ways, alternately, and print the ratios."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    got: dict[str, list[dict[str, float]]] = {"plain": [], "lean": []}
    for k in range(args.rounds):
        order = [("plain", PLAIN), ("lean", LEAN)]
        for name, statement in order if k % 2 == 0 else order[::-1]:
            got[name].append(time_import(statement))
        print(f"round {k + 1}: " + ", ".join(
            f"{n} {got[n][-1]['wall']:.2f} s wall / {got[n][-1]['cpu']:.2f} s CPU"
            for n in ("plain", "lean")
        ))  # fmt: skip
    for name in ("plain", "lean"):
        last = got[name][-1]
        print(f"{name:5}: median {statistics.median(r['wall'] for r in got[name]):.2f} s wall, "
              f"{statistics.median(r['cpu'] for r in got[name]):.2f} s CPU "
              f"(imports jax: {last['jax']}, keras: {last['keras']})")  # fmt: skip
    for what in ("wall", "cpu"):
        plain = statistics.median(r[what] for r in got["plain"])
        lean = statistics.median(r[what] for r in got["lean"])
        print(f"lean / plain, {what}: {lean / plain:.2f}x ({plain - lean:.2f} s less)")


if __name__ == "__main__":
    main()
