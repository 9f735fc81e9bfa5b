"""Pinned environments of deployment runtimes: where each one's Python is, and what is in it.

A runtime whose converter pins versions that conflict with anpred's main environment (a
:class:`~anpred.library.Library` with ``environment``) runs its worker with the Python of
its own environment. ``scripts/setup-runtimes.sh`` (``make runtimes``; ``make runtime
NAME=<environment>`` for one) builds one per lock file
``requirements/runtimes/<environment>.txt`` into the shared cache and records them in a JSON
file (``make env`` builds none and records those already built), by default
``anpred-runtimes.json`` in this clone's ``.venv`` (``sys.prefix`` of the main
environment); ``ANPRED_RUNTIME_ENVS`` names another file (tests).

The record of one environment::

    {"python": ".../rt-mnn-<hash>/bin/python", "site": [".../site-packages"],
     "lock": "<hash of the lock file>", "prefix": ".../rt-mnn-<hash>"}

Nothing is imported from an environment and no process is started: whether a library is in
it is found with :class:`importlib.machinery.PathFinder` on its site folders, its version
from the distribution metadata there. anpred itself is never installed into an environment:
its worker finds this clone's anpred on ``PYTHONPATH`` (:func:`worker_pythonpath`).

A library release's environment (``onnxruntime@1.17.3``, :mod:`anpred.library.versions`) is
named ``@<folder>``: it is the folder of that name in :func:`versions_root`, described by its
own ``record.json`` (same keys) and marked done by ``.ready``.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.metadata
import json
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import anpred

#: Environment variable naming the JSON record of built runtime environments.
ENVS_FILE_ENV = "ANPRED_RUNTIME_ENVS"
#: File name of that record inside the main environment (``.venv``).
ENVS_FILE_NAME = "anpred-runtimes.json"
#: Folder of the lock files, relative to the repository root.
LOCKS_FOLDER = Path("requirements") / "runtimes"
#: Environment variable naming another folder of lock files (tests; as in setup-runtimes.sh).
LOCKS_ENV = "ANPRED_RUNTIME_LOCKS"
#: What builds every runtime environment (``build_command`` builds one).
BUILD_HINT = "make runtimes"
#: Environment variable naming the folder of library releases' environments.
VERSIONS_ENV = "ANPRED_VERSIONS_CACHE"
#: First character of a release environment's name (``@onnxruntime-1.17.3-<hash>``).
RELEASE_MARK = "@"
#: A release environment's description and its done mark, in its folder.
RECORD_FILE = "record.json"
READY_FILE = ".ready"


def build_command(name: str) -> str:
    """The command that builds (or rebuilds) environment ``name`` alone."""
    return f"make runtime NAME={name}"


def _run_hint(name: str) -> str:
    return f"run `{build_command(name)}` (or `{BUILD_HINT}`)"


@dataclass(frozen=True)
class RuntimeEnv:
    """One built runtime environment.

    Attributes:
        name: The environment's name (its lock file's stem).
        python: Its Python executable.
        site: Its site-packages folders.
        lock: Hash of the lock file it was built from.
    """

    name: str
    python: Path
    site: tuple[Path, ...]
    lock: str = ""

    def has_module(self, module: str) -> bool:
        """Whether top-level ``module`` is installed in it (nothing is imported)."""
        top = module.partition(".")[0]
        paths = [str(p) for p in self.site]
        return importlib.machinery.PathFinder.find_spec(top, paths) is not None

    def version(self, distributions: Sequence[str]) -> str | None:
        """Version of the first of ``distributions`` installed in it."""
        paths = [str(p) for p in self.site]
        for dist in distributions:
            found = importlib.metadata.distributions(name=dist, path=paths)
            for distribution in found:
                return distribution.version
        return None


def envs_file() -> Path:
    """The JSON record of built environments (``ANPRED_RUNTIME_ENVS`` or the default)."""
    given = os.environ.get(ENVS_FILE_ENV)
    return Path(given) if given else Path(sys.prefix) / ENVS_FILE_NAME


def repo_root() -> Path | None:
    """The root of this clone (where ``requirements/runtimes`` is), ``None`` for an install."""
    root = Path(anpred.__file__).resolve().parents[2]
    return root if (root / LOCKS_FOLDER).is_dir() else None


def lock_file(name: str) -> Path | None:
    """The lock file of environment ``name`` in this clone (``None`` if not a clone)."""
    given = os.environ.get(LOCKS_ENV)
    if given:
        return Path(given) / f"{name}.txt"
    root = repo_root()
    return None if root is None else root / LOCKS_FOLDER / f"{name}.txt"


def lock_hash(path: Path) -> str:
    """The hash setup-env.sh keys an environment by: 16 hex digits of the lock's SHA-256."""
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _records() -> dict[str, dict]:
    path = envs_file()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def runtime_env(name: str) -> RuntimeEnv | None:
    """Environment ``name`` when it is built and matches this clone's lock file, else
    ``None`` (:func:`missing_reason` says why).
    """
    return None if missing_reason(name) else _env(name)


def versions_root() -> Path:
    """The folder of library releases' environments (``ANPRED_VERSIONS_CACHE`` or
    ``~/.cache/anpred/versions``).
    """
    given = os.environ.get(VERSIONS_ENV)
    return Path(given) if given else Path.home() / ".cache" / "anpred" / "versions"


def release_env(folder: str) -> RuntimeEnv | None:
    """The release environment in ``versions_root() / folder`` when it is built, else
    ``None``.
    """
    path = versions_root() / folder
    if not (path / READY_FILE).is_file():
        return None
    try:
        record = json.loads((path / RECORD_FILE).read_text())
    except (OSError, ValueError):
        return None
    python = Path(record.get("python", ""))
    if not python.exists():
        return None
    site = tuple(Path(p) for p in record.get("site", []))
    return RuntimeEnv(f"{RELEASE_MARK}{folder}", python, site)


def _env(name: str) -> RuntimeEnv | None:
    if name.startswith(RELEASE_MARK):
        return release_env(name[len(RELEASE_MARK) :])
    record = _records().get(name)
    if not isinstance(record, dict) or "python" not in record:
        return None
    python = Path(record["python"])
    site = tuple(Path(p) for p in record.get("site", []))
    return RuntimeEnv(name, python, site, str(record.get("lock", "")))


def missing_reason(name: str) -> str:
    """Why environment ``name`` cannot be used (``""`` when it can), ending in what to do."""
    if name.startswith(RELEASE_MARK):
        folder = versions_root() / name[len(RELEASE_MARK) :]
        if release_env(name[len(RELEASE_MARK) :]) is None:
            return f"its release environment {folder} is not built (built on first use)"
        return ""
    lock = lock_file(name)
    if lock is not None and not lock.exists():
        root = repo_root()
        shown = lock.relative_to(root) if root and lock.is_relative_to(root) else lock
        return f"its lock file {shown} is missing"
    env = _env(name)
    if env is None:
        return f"its environment {name!r} is not built: {_run_hint(name)}"
    if not env.python.exists() or not (env.python.parents[1] / ".ready").exists():
        return f"its environment {name!r} is gone from {env.python.parents[1]}: {_run_hint(name)}"
    if lock is not None and env.lock and env.lock != lock_hash(lock):
        return f"its environment {name!r} is older than {lock.name}: {_run_hint(name)}"
    return ""


def worker_pythonpath() -> str:
    """``PYTHONPATH`` of a worker in a runtime environment: this clone's anpred first."""
    source = str(Path(anpred.__file__).resolve().parents[1])
    rest = os.environ.get("PYTHONPATH", "")
    return os.pathsep.join([source, *([rest] if rest else [])])
