"""Verify every known bug outside anpred: its script in the buggy and in the fixed release.

Usage (from the repository root, with the main environment's Python)::

    nice -n 10 .venv/bin/python benchmarks/known_bugs/verify.py [--only ID ...] [--json PATH]

Each bug of ``configs/known-bugs.json`` has a script (``benchmarks/known_bugs/<id>.py``)
that imports only the library and numpy (onnx to build the ONNX ones), prints ``RESULT
<relative error vs float64>`` and exits 0 when the bug shows, 1 when it does not. It runs
here in the release's pinned environment, the one ``anpred run --libs LIB@VERSION`` uses
(``anpred.library.versions.ensure_version_env``: built from the package index on first use,
cached under ``~/.cache/anpred/versions``). A bug is verified when the buggy release shows
it and the fixed release does not. Prints the table (Markdown) and, with ``--json``, writes
the measurements.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

from anpred.evaluation.known_bugs import KnownBug, installed_version, load_known_bugs

#: Seconds one script may take (the largest, jax's 32,769-row jit, takes ~5 s).
SCRIPT_TIMEOUT_S = 600
_RESULT = re.compile(r"^RESULT (\S+)$", re.MULTILINE)


def cpu_model() -> str:
    """The CPU's model name (Linux), else the machine type."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return platform.machine()
    return next((ln.split(":", 1)[1].strip() for ln in text.splitlines()
                 if ln.startswith("model name")), platform.machine())  # fmt: skip


def cpu_flags() -> list[str]:
    """The CPU's numeric feature flags that decide which kernels run (Linux)."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return []
    flags = next((ln.split(":", 1)[1].split() for ln in text.splitlines()
                  if ln.startswith("flags")), [])  # fmt: skip
    return sorted(f for f in flags if f.startswith(("avx512", "amx", "avx_vnni", "fma")))


def environment_python(library: str, version: str) -> Path:
    """The Python of ``library@version``'s environment (built now if missing); this one
    when ``version`` is the installed release.
    """
    from anpred.library.versions import ensure_version_env

    if version == installed_version(library):
        return Path(sys.executable)

    env = ensure_version_env(library, version, say=lambda m: print(m, file=sys.stderr))
    return Path(env.python)


def run_script(python: Path, script: Path) -> dict[str, object]:
    """Run ``script`` with ``python``; its measured error, exit code and first line."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "TF_CPP_MIN_LOG_LEVEL": "3"}
    started = time.monotonic()
    try:
        done = subprocess.run(
            [str(python), str(script)], capture_output=True, text=True,
            timeout=SCRIPT_TIMEOUT_S, env=env, check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return {"shows": None, "result": None, "line": "timed out", "rc": None}
    found = _RESULT.search(done.stdout)
    lines = [ln for ln in done.stdout.splitlines() if ln and not ln.startswith("RESULT")]
    shows = {0: True, 1: False}.get(done.returncode)
    return {
        "shows": shows,
        "result": float(found.group(1)) if found else None,
        "line": lines[0] if lines else (done.stderr.strip().splitlines() or [""])[-1],
        "rc": done.returncode,
        "seconds": round(time.monotonic() - started, 1),
    }


def verify(bug: KnownBug, root: Path) -> dict[str, object]:
    """Both runs of one bug's script; ``verified`` when only the buggy release shows it."""
    sides = {}
    for side, version in (("buggy", bug.buggy), ("fixed", bug.fixed)):
        try:
            python = environment_python(bug.library, version)
        except Exception as err:  # noqa: BLE001 - an environment that cannot be built
            sides[side] = {"shows": None, "result": None, "line": f"no environment: {err}"}
            continue
        sides[side] = run_script(python, root / bug.script)
    verified = sides["buggy"]["shows"] is True and sides["fixed"]["shows"] is False
    return {"id": bug.id, "link": bug.link, "library": bug.library,
            "buggy_release": bug.buggy, "fixed_release": bug.fixed, "verified": verified,
            **sides}  # fmt: skip


def table(rows: list[dict[str, object]]) -> str:
    """The verification table (Markdown)."""

    def cell(side: dict) -> str:
        if side["result"] is None:
            return f"error: {side['line']}"
        return f"{side['result']:.3g} ({'shows' if side['shows'] else 'clean'})"

    lines = [
        "| bug | buggy release: error vs fp64 | fixed release: error vs fp64 | verified |",
        "|---|---|---|---|",
    ]
    for r in rows:
        lines.append(f"| [{r['id']}]({r['link']}) | {r['library']} {r['buggy_release']}: "
                     f"{cell(r['buggy'])} | {r['fixed_release']}: {cell(r['fixed'])} | "
                     f"{'yes' if r['verified'] else 'no'} |")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    """Verify the bugs, print the table; exit 1 when one is not verified."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="configs/known-bugs.json")
    parser.add_argument("--only", nargs="*", default=[], help="bug ids (default: all)")
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()
    root = Path.cwd()
    bugs = load_known_bugs(args.config)
    chosen = [bugs.get(i) for i in args.only] if args.only else list(bugs.bugs)
    rows = []
    for bug in chosen:
        row = verify(bug, root)
        print(f"{bug.id}: buggy {row['buggy']['line']} | fixed {row['fixed']['line']} | "
              f"verified {row['verified']}", file=sys.stderr)  # fmt: skip
        rows.append(row)
    print(table(rows))
    if args.json:
        machine = {"cpu": cpu_model(), "flags": cpu_flags()}
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({"machine": machine, "bugs": rows}, indent=1))
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
