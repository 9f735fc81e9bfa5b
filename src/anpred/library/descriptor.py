"""The library descriptor: what anpred knows about one library or runtime, in one place.

A :class:`Library` is registered once per library with :func:`register_library`; participant
parsing, ``anpred libs``, availability checks, versions and the worker's runner lookup all
read it. Nothing here imports a DL library: availability is checked with
``importlib.util.find_spec``, versions come from distribution metadata, and the runner is
named as ``"module:ClassName"`` and imported only inside a worker process.

Libraries from outside anpred are loaded when the registry is first used, in the main
process and in every worker (workers inherit the environment):

- ``ANPRED_PLUGINS=pkg.mod1,pkg.mod2``: modules imported in that order, each calling
  :func:`register_library`;
- the entry-point group ``anpred.libraries`` of installed distributions: each entry point
  names a module (imported), a :class:`Library` (registered) or a function (called with no
  arguments).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import os
import re
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from anpred.errors import AnpredError, UsageError
from anpred.library.precision import Precision

#: Environment variable naming plugin modules (comma list) that register libraries.
PLUGINS_ENV = "ANPRED_PLUGINS"
#: Entry-point group of installed distributions that register libraries.
ENTRY_POINT_GROUP = "anpred.libraries"

#: A library name; a release's descriptor (:mod:`anpred.library.versions`) adds
#: ``@version``, and is never registered.
_NAME = re.compile(r"[a-z][a-z0-9_-]*(@[0-9][0-9A-Za-z.+!_-]*)?")
_CONFIG = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_RUNNER = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_]\w*")


class Loads(str, Enum):
    """What a library's runner loads: how the model reaches the library."""

    #: The reference torch module itself (hooks for anchors); torch translates the ONNX
    #: graph instead when the user brings only an ONNX file.
    NATIVE_MODULE = "native-module"
    #: The anchored ONNX file, executed by the library's own ONNX loader.
    ONNX_FILE = "onnx-file"
    #: The anchored ONNX graph through anpred's per-op translators (``anpred.translate``).
    TRANSLATED_ONNX = "translated-onnx"
    #: An artifact made by the library's own converter from the anchored model.
    CONVERTED_ARTIFACT = "converted-artifact"


@dataclass(frozen=True)
class Library:
    """Everything anpred needs to know about one library or runtime.

    Attributes:
        name: Library name, the part of a participant name before ``[``
            (lowercase letters, digits, ``_``, ``-``).
        distributions: Distribution names, the first installed one gives the version.
        extra: The anpred pip extra that installs it (``pip install 'anpred[<extra>]'``),
            ``""`` for a library added from outside anpred (give ``requirement``).
        import_name: Top-level module whose presence means the library is installed
            (checked with ``find_spec``, never imported in the main process).
        runner: The :class:`~anpred.backends.base.Runner` subclass as
            ``"module:ClassName"``, imported only inside the participant's worker.
        loads: How the model reaches the library (:class:`Loads`).
        configurations: Configuration name → settings handed to the runner; ``""`` is the
            default configuration and must be present. A settings key ``"env"`` holds
            environment variables the worker process starts with.
        shares_process: Whether the library may be imported in a process that has
            imported another DL library. Every participant runs in its own worker either
            way; ``False`` marks a library that must also be kept apart in test runs and
            tools that import libraries directly (tensorflow and paddle segfault together).
        in_all: Whether ``--libs all`` includes its default configuration.
        requirement: What ``pip install`` needs when it is not an anpred extra (a library
            added by a plugin, e.g. ``"anpred-mnn"``); overrides ``extra`` in install hints.
        environment: Name of the library's own pinned environment
            (``requirements/runtimes/<environment>.txt``, built by ``make env``); ``""``
            when it lives in anpred's main environment. Its worker runs that environment's
            Python (deployment runtimes whose converters pin conflicting versions).
        converter: For :attr:`Loads.CONVERTED_ARTIFACT`: the converter's display name
            (``"onnx2tf"``, ``"pnnx"``, ...) shown by ``anpred libs``.
        converter_distributions: Distributions whose version is the converter's version
            (first installed one).
        precisions: Configuration name → the arithmetic it declares
            (:class:`~anpred.library.precision.Precision`); the oracle judges each
            participant within its precision class. A configuration not named here is
            fp32.
        switches: The settings a settings bisection (``anpred bisect``) may flip: setting
            key → its values, the library's default first. ``env.VAR`` names an
            environment variable of the worker (``env.TF_ENABLE_ONEDNN_OPTS``). Only
            settings the runner reads; empty: nothing to bisect.
    """

    name: str
    distributions: tuple[str, ...]
    extra: str
    import_name: str
    runner: str
    loads: Loads
    configurations: Mapping[str, Mapping[str, Any]] = field(
        default_factory=lambda: {"": {}}, hash=False
    )
    shares_process: bool = True
    in_all: bool = True
    requirement: str = ""
    environment: str = ""
    converter: str = ""
    converter_distributions: tuple[str, ...] = ()
    precisions: Mapping[str, Precision] = field(default_factory=dict, hash=False)
    switches: Mapping[str, tuple[Any, ...]] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        where = f"library descriptor {self.name!r}"
        if not isinstance(self.name, str) or not _NAME.fullmatch(self.name):
            raise UsageError(f"{where}: the name must match {_NAME.pattern}")
        if isinstance(self.distributions, str) or not self.distributions:
            raise UsageError(f"{where}: distributions must be a non-empty tuple of names")
        if not (self.extra or self.requirement):
            raise UsageError(f"{where}: give the pip extra or the requirement that installs it")
        if not _RUNNER.fullmatch(self.runner):
            raise UsageError(f"{where}: runner must be 'module:ClassName', not {self.runner!r}")
        if "" not in self.configurations:
            raise UsageError(f"{where}: configurations need the default configuration ''")
        bad = [c for c in self.configurations if c and not _CONFIG.fullmatch(c)]
        if bad:
            raise UsageError(f"{where}: configuration names must match {_CONFIG.pattern}: {bad}")
        object.__setattr__(self, "distributions", tuple(self.distributions))
        object.__setattr__(self, "converter_distributions", tuple(self.converter_distributions))
        object.__setattr__(self, "loads", Loads(self.loads))
        frozen = {c: _plain(s) for c, s in self.configurations.items()}
        object.__setattr__(self, "configurations", types.MappingProxyType(frozen))
        unknown = [c for c in self.precisions if c not in self.configurations]
        if unknown:
            raise UsageError(f"{where}: precisions of unknown configurations {unknown}")
        declared = {}
        for config, precision in self.precisions.items():
            if isinstance(precision, Mapping):
                precision = Precision(**precision)
            if not isinstance(precision, Precision):
                raise UsageError(f"{where}: the precision of {config!r} must be a Precision")
            declared[config] = precision
        object.__setattr__(self, "precisions", types.MappingProxyType(declared))
        switches = {str(k): tuple(v) for k, v in self.switches.items()}
        if any(len(v) < 2 for v in switches.values()):
            raise UsageError(f"{where}: every switch needs at least two values")
        object.__setattr__(self, "switches", types.MappingProxyType(switches))

    def precision(self, config: str = "") -> Precision:
        """The arithmetic ``config`` declares (fp32 when it declares none)."""
        return self.precisions.get(config, Precision())

    def participant_name(self, config: str = "") -> str:
        """Participant name of ``config``: ``name`` or ``name[config]``."""
        return f"{self.name}[{config}]" if config else self.name

    def participant_names(self) -> list[str]:
        """Every configuration's participant name, default first."""
        return [self.participant_name(c) for c in self.configurations]

    def install_hint(self) -> str:
        """The command that installs the library (for a runtime in its own environment:
        why that environment is missing, and ``make env``).
        """
        if self.environment.startswith("@"):  # a release: built on first use
            return self.requirement
        if self.environment:
            from anpred.library.environments import BUILD_HINT, missing_reason

            reason = missing_reason(self.environment)
            if reason:
                return reason if BUILD_HINT in reason else f"{reason} ({BUILD_HINT})"
            return f"{BUILD_HINT} (requirements/runtimes/{self.environment}.txt)"
        return f"pip install '{self.requirement or f'anpred[{self.extra}]'}'"

    def available(self) -> bool:
        """Whether the library is installed (its module is found; nothing is imported).

        For a runtime with its own environment: whether that environment is built from
        this clone's lock file and holds the module.
        """
        if self.environment:
            from anpred.library.environments import runtime_env

            env = runtime_env(self.environment)
            return env is not None and env.has_module(self.import_name)
        try:
            return importlib.util.find_spec(self.import_name) is not None
        except (ImportError, ValueError):  # a dotted name whose parent is missing
            return False

    def version(self) -> str | None:
        """Version of the first installed distribution, ``None`` when none is installed
        (read from the runtime's own environment when it has one).
        """
        if self.environment:
            return self._env_version(self.distributions)
        for dist in self.distributions:
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
        return None

    def converter_version(self) -> str | None:
        """Version of the converter (first installed of ``converter_distributions``)."""
        if not self.converter_distributions:
            return None
        if self.environment:
            return self._env_version(self.converter_distributions)
        for dist in self.converter_distributions:
            try:
                return importlib.metadata.version(dist)
            except importlib.metadata.PackageNotFoundError:
                continue
        return None

    def _env_version(self, distributions: tuple[str, ...]) -> str | None:
        from anpred.library.environments import runtime_env

        env = runtime_env(self.environment)
        return None if env is None else env.version(distributions)


def _plain(settings: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of JSON-like settings as plain dicts and lists."""
    if not isinstance(settings, Mapping):
        raise UsageError(f"configuration settings must be mappings, not {settings!r}")

    def copy(value: Any) -> Any:
        if isinstance(value, Mapping):
            return {str(k): copy(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [copy(v) for v in value]
        return value

    return copy(settings)


_REGISTRY: dict[str, Library] = {}
#: Who registered each library (for the duplicate-registration message).
_ORIGIN: dict[str, str] = {}
#: What is being loaded right now (builtin set, a plugin module, an entry point).
_source = "register_library()"
_loaded = False


def register_library(library: Library) -> Library:
    """Register ``library``; return it unchanged.

    Raises:
        UsageError: A library of that name is already registered.
    """
    _ensure_loaded()
    _add(library)
    return library


def _add(library: Library) -> None:
    if "@" in library.name:
        raise UsageError(
            f"library {library.name!r}: a release is not registered, it is asked for as a "
            "participant (anpred.library.versions)"
        )
    if library.name in _REGISTRY:
        raise UsageError(
            f"library {library.name!r} is registered twice: by {_ORIGIN[library.name]} "
            f"and by {_source}"
        )
    _REGISTRY[library.name] = library
    _ORIGIN[library.name] = _source


def get_library(name: str) -> Library:
    """Return the descriptor of ``name``.

    Raises:
        UsageError: No library of that name is registered.
    """
    _ensure_loaded()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown library {name!r}; choose from {', '.join(_REGISTRY)}") from None


def libraries() -> tuple[Library, ...]:
    """Every registered library, builtins first, then plugins in load order."""
    _ensure_loaded()
    return tuple(_REGISTRY.values())


def plugin_modules() -> list[str]:
    """The modules named by ``ANPRED_PLUGINS``, in order."""
    return [m.strip() for m in os.environ.get(PLUGINS_ENV, "").split(",") if m.strip()]


def _ensure_loaded() -> None:
    """Register the builtin libraries, then load the plugins (once per process)."""
    global _loaded, _source
    if _loaded:
        return
    _loaded = True
    from anpred.library.builtin import BUILTIN_LIBRARIES

    try:
        _source = "anpred (builtin)"
        for library in BUILTIN_LIBRARIES:
            _add(library)
        from anpred.library.runtimes import RUNTIME_LIBRARIES

        _source = "anpred (deployment runtimes)"
        for library in RUNTIME_LIBRARIES:
            _add(library)
        for module in plugin_modules():
            _source = f"{PLUGINS_ENV} module {module!r}"
            _load(lambda m=module: importlib.import_module(m))
        for point in importlib.metadata.entry_points(group=ENTRY_POINT_GROUP):
            _source = f"entry point {point.name!r} ({point.value})"
            _load(point.load)
    finally:
        _source = "register_library()"


def _load(load: Callable[[], Any]) -> None:
    """Import a plugin: a module that registers, a :class:`Library` to register, or a
    function that registers (called with no arguments); its errors become one line.
    """
    try:
        loaded = load()
        if isinstance(loaded, Library):
            _add(loaded)
        elif callable(loaded) and not isinstance(loaded, types.ModuleType | type):
            loaded()
    except AnpredError:
        raise
    except Exception as err:  # a plugin's own error, reported as one line
        raise UsageError(
            f"could not load the library plugin {_source}: {err.__class__.__name__}: {err}"
        ) from err
