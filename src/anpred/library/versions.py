"""Library releases as participants: ``onnxruntime@1.17.3`` runs that release of onnxruntime.

A participant ``LIBRARY@VERSION`` (any configuration too: ``openvino@2024.4.0[bf16]``) is
the library's own runner, configurations and precisions (its descriptor, :func:`version_library`)
in a pinned environment that holds that release: a venv built from the package index on
first use (:func:`ensure_version_env`, one progress line), cached, and used offline from
then on (its worker runs with pip and the model hubs offline, like a deployment runtime's).

An environment holds the release (:data:`RECIPES`: the distributions that make it up, the
converter for a converted runtime), plus what anpred's worker imports there (numpy and
onnx; anpred itself comes from this clone on ``PYTHONPATH``). Everything is installed as a
wheel (``--only-binary=:all:``): nothing compiles. Releases built against numpy 1 fail
their import check under numpy 2: the environment is then installed again with
``numpy<2`` (recorded).

Where: ``$ANPRED_VERSIONS_CACHE`` (default ``~/.cache/anpred/versions``), one folder per
release and recipe, ``<library>-<version>-<16 hex digits of the recipe's hash>``, marked done
by ``.ready``, described by ``record.json`` (what was asked, what pip installed, build time
and size). A failed build leaves its log next to it and nothing else; the next use tries
again. Nothing here imports a DL library.
"""

from __future__ import annotations

import dataclasses
import fcntl
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from anpred.errors import UsageError
from anpred.library.descriptor import Library, get_library
from anpred.library.environments import (
    READY_FILE,
    RECORD_FILE,
    RELEASE_MARK,
    RuntimeEnv,
    release_env,
    versions_root,
)

#: Separates a library from its release in a participant spec (``onnxruntime@1.17.3``).
VERSION_MARK = "@"
#: Revision of the recipes: part of every environment's key (a change builds anew).
RECIPE_REVISION = 1
#: Seconds one ``pip install`` may take (torch's CUDA wheels: ~3.4 GB).
INSTALL_TIMEOUT_S = 1800

_VERSION = re.compile(r"[0-9][0-9A-Za-z.+!_-]*")


@dataclass(frozen=True)
class Recipe:
    """What makes up a release of one library in its environment.

    Attributes:
        requirements: pip requirements, ``{version}`` standing for the release.
        smoke: Python statements that must run in the environment once it is installed
            (the import check that tells a release built against numpy 1).
    """

    requirements: tuple[str, ...]
    smoke: str


#: The libraries whose releases can be participants. ncnn's converter (pnnx, a static
#: binary reading TorchScript) and the torch that traces for it are today's, as in the
#: ``torch-deploy`` environment; only the ncnn runtime is the release asked for (torch's CPU
#: build: 0.9 GB instead of 6.4 GB with CUDA wheels).
RECIPES: dict[str, Recipe] = {
    "torch": Recipe(("torch=={version}",), "import torch; torch.ones(2) @ torch.ones(2)"),
    "onnxruntime": Recipe(("onnxruntime=={version}",), "import onnxruntime"),
    "openvino": Recipe(("openvino=={version}",), "import openvino; openvino.Core()"),
    "tensorflow": Recipe(("tensorflow-cpu=={version}",), "import tensorflow"),
    "jax": Recipe(("jax[cpu]=={version}",), "import jax.numpy as jnp; jnp.ones(2) + 1"),
    "paddle": Recipe(("paddlepaddle=={version}",), "import paddle"),
    "ncnn": Recipe(
        ("ncnn=={version}", "pnnx==20261020", "torch==2.13.0+cpu", "onnxslim==0.1.98"),
        "import ncnn, pnnx, torch; numpy.array(ncnn.Mat(numpy.ones((2, 3), 'float32')).clone())",
    ),
}

#: What anpred's worker imports besides the library (same onnx as the main environment).
WORKER_REQUIREMENTS = ("numpy", "onnx=={onnx}")
#: Added when the release fails its import check under numpy 2.
NUMPY1 = "numpy<2"
#: What replaces the pinned onnx when the release's own pins conflict with it.
ANY_ONNX = "onnx"
_ONNX_CONFLICT = re.compile(r"Cannot install .*\bonnx==", re.IGNORECASE)


def releases_hint() -> str:
    """What ``anpred libs`` says about releases as participants."""
    return (
        f"releases (--libs LIB@VERSION, any configuration too): that release of "
        f"{', '.join(RECIPES)}, installed from the package index into its own environment "
        f"on first use, offline from then on (onnxruntime@1.17.3, openvino@2024.4.0[bf16]; "
        f"built ones: anpred doctor; docs/usage.md)"
    )


def split_spec(spec: str) -> tuple[str, str]:
    """``"onnxruntime@1.17.3"`` → ``("onnxruntime", "1.17.3")``; ``("torch", "")`` without
    a release.
    """
    library, _, version = spec.partition(VERSION_MARK)
    return library.strip(), version.strip()


def check_release(library: str, version: str) -> Recipe:
    """The recipe of ``library@version``, the spec checked.

    Raises:
        UsageError: Unknown library, one whose releases cannot be participants, or a
            version that is not a version.
    """
    descriptor = get_library(library)  # unknown library: its one line
    if library not in RECIPES:
        raise UsageError(
            f"{descriptor.name}@{version}: releases of {library} cannot be participants "
            f"(they can for {', '.join(RECIPES)})"
        )
    if not _VERSION.fullmatch(version):
        raise UsageError(f"{library}@{version}: {version!r} is not a release version")
    return RECIPES[library]


def requirements(library: str, version: str) -> list[str]:
    """What ``pip install`` gets for ``library@version`` (before any ``numpy<2`` retry)."""
    recipe = check_release(library, version)
    onnx = importlib.metadata.version("onnx")
    return [r.format(version=version) for r in recipe.requirements] + [
        r.format(onnx=onnx) for r in WORKER_REQUIREMENTS
    ]


def env_name(library: str, version: str) -> str:
    """The folder name of ``library@version``'s environment (in :func:`versions_root`)."""
    key = json.dumps(
        [RECIPE_REVISION, library, version, requirements(library, version), _python_tag()]
    )
    return f"{library}-{version}-{hashlib.sha256(key.encode()).hexdigest()[:16]}"


def env_folder(library: str, version: str) -> Path:
    """Where ``library@version``'s environment is (built or not)."""
    return versions_root() / env_name(library, version)


def version_library(library: str, version: str) -> Library:
    """The descriptor of participant ``library@version``: the library's own runner,
    configurations and precisions, in that release's environment.

    Raises:
        UsageError: See :func:`check_release`.
    """
    check_release(library, version)
    base = get_library(library)
    return dataclasses.replace(
        base,
        name=f"{library}{VERSION_MARK}{version}",
        environment=f"{RELEASE_MARK}{env_name(library, version)}",
        requirement=f"{library}=={version} (built on first use into {versions_root()})",
        in_all=False,
    )


def ensure_version_env(
    library: str, version: str, say: Callable[[str], None] = print
) -> RuntimeEnv:
    """``library@version``'s environment: the cached one, else built now (from the package
    index, once; one progress line).

    Raises:
        UsageError: Unknown library, or a release the index does not have or that fails to
            install or import (one line naming it, the build log's path).
    """
    reqs = requirements(library, version)
    name = env_name(library, version)
    target = versions_root() / name
    env = release_env(name)
    if env is not None:
        return env
    target.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{target}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # another process may be building it
        env = release_env(name)
        if env is None:
            say(f"versions: building {library} {version} into {_shown(target)} (first time)")
            started = time.monotonic()
            _build(library, version, reqs, target)
            seconds = time.monotonic() - started
            record = json.loads((target / RECORD_FILE).read_text())
            record.update(build_seconds=round(seconds, 1), bytes=_size(target))
            (target / RECORD_FILE).write_text(json.dumps(record, indent=1))
            (target / READY_FILE).touch()
            say(
                f"versions: {library} {version} ready in {seconds:.0f} s "
                f"({record['bytes'] / 1e6:.0f} MB)"
            )
            env = release_env(name)
    if env is None:
        raise UsageError(f"{library}@{version}: its environment {target} is damaged; remove it")
    return env


def built_releases() -> list[dict]:
    """The records of every built release environment (for ``anpred doctor``)."""
    root = versions_root()
    if not root.is_dir():
        return []
    found = []
    for folder in sorted(root.iterdir()):
        if (folder / READY_FILE).is_file():
            try:
                found.append({**json.loads((folder / RECORD_FILE).read_text()), "path": folder})
            except (OSError, ValueError):
                continue
    return found


def _build(library: str, version: str, reqs: Sequence[str], target: Path) -> None:
    """Build the venv at ``target``: install ``reqs`` (the onnx of the release's time when
    the pinned one conflicts with it), check the import, retry the install with ``numpy<2``
    when the release fails the check.

    Raises:
        UsageError: The install or the import check failed (the log stays beside it).
    """
    log = Path(f"{target}.log")
    shutil.rmtree(target, ignore_errors=True)
    with open(log, "w") as out:
        _step(library, version, [sys.executable, "-m", "venv", str(target)], out, log)
        python = str(target / "bin" / "python")
        install = [python, "-m", "pip", "install", "--only-binary=:all:", "--progress-bar=off"]
        if not _step(library, version, [*install, *reqs], out, log, pip=True, retry=True):
            # an older release pins a protobuf today's onnx cannot use (tensorflow-cpu
            # 2.18.0: protobuf<6, onnx 1.23.2: >=6.31.1): the onnx of its time instead
            reqs = [ANY_ONNX if r.startswith(f"{ANY_ONNX}==") else r for r in reqs]
            _step(library, version, [*install, *reqs], out, log, pip=True)
        extra: list[str] = []
        problem = _smoke(python, library, out)
        if problem and "numpy" in problem.lower():  # built against numpy 1
            extra = [NUMPY1]
            _step(library, version, [*install, *reqs, *extra], out, log, pip=True)
            problem = _smoke(python, library, out)
        if problem:
            shutil.rmtree(target, ignore_errors=True)
            raise UsageError(
                f"{library}@{version} installs but does not import: {problem} (log: {log})"
            )
        site = subprocess.run(
            [python, "-c", _SITE], capture_output=True, text=True, check=True
        ).stdout
        frozen = subprocess.run(
            [python, "-m", "pip", "list", "--format=json"], capture_output=True, text=True
        ).stdout
    record = {
        "library": library,
        "version": version,
        "requirements": [*reqs, *extra],
        "python": python,
        "site": json.loads(site),
        "installed": {p["name"]: p["version"] for p in json.loads(frozen or "[]")},
        "recipe_revision": RECIPE_REVISION,
    }
    (target / RECORD_FILE).write_text(json.dumps(record, indent=1))


_SITE = "import sysconfig as s, json; p = s.get_paths(); print(json.dumps(sorted({p['purelib'], p['platlib']})))"  # noqa: E501


def _step(
    library: str,
    version: str,
    command: list[str],
    out: IO[str],
    log: Path,
    pip: bool = False,
    retry: bool = False,
) -> bool:
    """Run one build step into the log; with ``retry``, return ``False`` instead of failing
    when pip found the pinned onnx in conflict with the release.

    Raises:
        UsageError: It failed or took too long (the half-built environment is removed).
    """
    out.write(f"$ {' '.join(command)}\n")
    out.flush()
    start = log.stat().st_size
    try:
        done = subprocess.run(
            command, stdout=out, stderr=subprocess.STDOUT, timeout=INSTALL_TIMEOUT_S
        )
    except subprocess.TimeoutExpired:
        raise UsageError(
            f"{library}@{version}: installing took over {INSTALL_TIMEOUT_S} s (log: {log})"
        ) from None
    if done.returncode:
        out.flush()
        text = log.read_bytes()[start:].decode(errors="replace")
        if retry and _ONNX_CONFLICT.search(text):
            return False
        reason = _pip_reason(library, version, text) if pip else "venv failed"
        shutil.rmtree(str(log).removesuffix(".log"), ignore_errors=True)
        raise UsageError(f"{library}@{version}: {reason} (log: {log})")
    return True


def _pip_reason(library: str, version: str, text: str) -> str:
    """One line saying why pip failed."""
    dist = RECIPES[library].requirements[0].partition("=")[0].partition("[")[0]
    missing = re.search(
        rf"Could not find a version that satisfies the requirement {re.escape(dist)}\S*"
        r" \(from versions: ([^)]*)\)",
        text,
    )
    if missing:
        have = [v.strip() for v in missing.group(1).split(",") if v.strip() not in ("", "none")]
        if not have:
            return f"the package index has no {dist} {version} (it lists none: is it reachable?)"
        span = f"{have[0]} ... {have[-1]}" if len(have) > 2 else ", ".join(have)
        return f"the package index has no {dist} {version} (it has {span})"
    if "Could not find a version" in text or "No matching distribution" in text:
        line = next(
            (x for x in text.splitlines() if "No matching distribution" in x),
            "a requirement was not found",
        )
        return f"cannot be installed: {line.removeprefix('ERROR: ').strip()}"
    conflict = re.search(r"ERROR: (Cannot install .*?conflicting dependencies)", text)
    if conflict:
        return conflict.group(1)
    errors = [x.removeprefix("ERROR: ").strip() for x in text.splitlines() if "ERROR" in x]
    return f"pip failed: {errors[-1][:300] if errors else 'see the log'}"


def _smoke(python: str, library: str, out: IO[str]) -> str:
    """The error the release's import check ends in (``""``: it imports)."""
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONWARNINGS": "ignore"}
    code = f"import numpy, onnx\n{RECIPES[library].smoke}"
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, env=env)
    out.write(f"$ import check\n{done.stdout}{done.stderr}\n")
    text = done.stdout + done.stderr
    if done.returncode == 0 and "compiled using NumPy 1.x" not in text:
        return ""
    lines = [x.strip() for x in text.splitlines() if x.strip()]
    if "NumPy 1.x" in text or "_ARRAY_API" in text:
        return "built against numpy 1 (NumPy 1.x module under NumPy 2)"
    return lines[-1][:300] if lines else f"exit code {done.returncode}"


def _size(folder: Path) -> int:
    total = 0
    for root, _, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            if not os.path.islink(path):
                total += os.path.getsize(path)
    return total


def _shown(path: Path) -> str:
    home = str(Path.home())
    text = str(path)
    return "~" + text[len(home) :] if text.startswith(home + os.sep) else text


def _python_tag() -> str:
    return f"cp{sys.version_info.major}{sys.version_info.minor}"
