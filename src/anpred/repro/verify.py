"""Run a reproducer's script in its library's own environment and read what it says.

A library in anpred's main environment runs under this interpreter (``sys.executable``);
a deployment runtime under its pinned environment's Python
(:func:`anpred.library.environments.runtime_env`). The script runs from its folder, with
nothing of anpred's on its path (``PYTHONPATH`` removed), and must not import anpred
(checked in its text). It prints ``REPRO {json}`` last; it reproduces when it exits 1
(beyond the floor's threshold) **and** its error is within the symptom factor of the
reduced case's error under the oracle (the same error, not another one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anpred.repro.symptom import SYMPTOM_FACTOR

#: Seconds a script (and its preparation) may take: a reduced case runs in well under a
#: second; importing TensorFlow takes ~5 s on the 2-core machine.
SCRIPT_TIMEOUT = 600.0


@dataclass(frozen=True)
class Verification:
    """What running a script showed.

    Attributes:
        reproduces: Whether it showed the same error (module doc).
        reason: Why not (empty when it did).
        record: ``repro.json``'s ``script`` entry.
    """

    reproduces: bool
    reason: str
    record: dict[str, Any]


def python_of(library: str) -> Path | None:
    """The Python that runs ``library`` (``None``: its environment is not built)."""
    from anpred.library import get_library
    from anpred.library.environments import runtime_env

    descriptor = get_library(library)
    if not descriptor.environment:
        return Path(sys.executable)
    env = runtime_env(descriptor.environment)
    return None if env is None else Path(env.python)


def imports_anpred(text: str) -> bool:
    """Whether a script's text imports anpred."""
    return any(
        line.strip().startswith(("import anpred", "from anpred")) for line in text.splitlines()
    )


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "ANPRED_PLUGINS")}
    env.setdefault("JAX_PLATFORMS", "cpu")
    return env


def verify(folder: Path, library: str, script: str, prepare: str, case_error: float | None,
           timeout: float = SCRIPT_TIMEOUT) -> Verification:  # fmt: skip
    """Run ``prepare`` (if any), then ``script``, in ``folder`` (module doc)."""
    python = python_of(library)
    command = f"python {prepare} && python {script}" if prepare else f"python {script}"
    base: dict[str, Any] = {"name": script, "command": command}
    if python is None:
        return Verification(False, f"the {library} environment is not built", base)
    if imports_anpred((folder / script).read_text()):
        return Verification(False, "the script imports anpred", base)
    base["python"] = str(python)
    started = time.perf_counter()
    output = ""
    try:
        if prepare:
            done = subprocess.run([str(python), prepare], cwd=folder, capture_output=True,
                                  text=True, timeout=timeout, env=_env())  # fmt: skip
            if done.returncode != 0:
                tail = (done.stdout + done.stderr)[-600:]
                return Verification(False, f"{prepare} failed: {tail}", {**base, "output": tail})
        done = subprocess.run([str(python), script], cwd=folder, capture_output=True, text=True,
                              timeout=timeout, env=_env())  # fmt: skip
    except subprocess.TimeoutExpired:
        return Verification(False, f"the script ran over {timeout:g} s", base)
    seconds = round(time.perf_counter() - started, 2)
    output = done.stdout + done.stderr
    said = next((json.loads(line[6:]) for line in reversed(done.stdout.splitlines())
                 if line.startswith("REPRO ")), None)  # fmt: skip
    record = {**base, "returncode": done.returncode, "seconds": seconds,
              "output": "\n".join(done.stdout.splitlines()[-6:])}  # fmt: skip
    if said is None:
        return Verification(False, f"the script failed: {output[-600:]}", record)
    record.update(error=said["error"], errors=said["errors"])
    if done.returncode != 1:
        return Verification(False, "the script's error stays within the floor's threshold",
                            record)  # fmt: skip
    if case_error:
        ratio = said["error"] / case_error
        record["ratio"] = ratio
        if not 1 / SYMPTOM_FACTOR <= ratio <= SYMPTOM_FACTOR:
            return Verification(False, f"the script's error is {ratio:.3g}x the reduced "
                                f"case's under anpred: another error", record)  # fmt: skip
    return Verification(True, "", record)
