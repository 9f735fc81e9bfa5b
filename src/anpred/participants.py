"""Participants: a library in one precision configuration, named ``library[config]``.

Libraries and their configurations come from the library descriptors
(:mod:`anpred.library`); ``anpred libs`` lists them and ``--libs`` accepts them.
``library@version`` (``onnxruntime@1.17.3``, ``openvino@2024.4.0[bf16]``) is that release of
the library, run from its own environment (:mod:`anpred.library.versions`).
:data:`LIBRARIES`, :data:`CONFIGURATIONS` and :data:`DEFAULT_LIBRARIES` are read-only views
on that registry, so libraries added by plugins appear in them too.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anpred.errors import UsageError
from anpred.library import Library, Precision, get_library, libraries
from anpred.library.precision import FP32, ideal_reference
from anpred.library.versions import VERSION_MARK, ensure_version_env, split_spec, version_library
from anpred.progress import to_stderr


class _LibraryView(Mapping[str, Any]):
    """A read-only mapping library name → one fact of its descriptor, read when used."""

    def __init__(self, fact: Callable[[Library], Any], doc: str) -> None:
        self._fact = fact
        self.__doc__ = doc

    def __getitem__(self, library: str) -> Any:
        if not isinstance(library, str) or library not in self._names():
            raise KeyError(library)
        return self._fact(get_library(library))

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    @staticmethod
    def _names() -> list[str]:
        return [library.name for library in libraries()]


class _DefaultLibraries(Sequence[str]):
    """The libraries ``--libs all`` runs (``in_all``), in display order, read when used."""

    def _names(self) -> tuple[str, ...]:
        return tuple(library.name for library in libraries() if library.in_all)

    def __getitem__(self, index: Any) -> Any:
        return self._names()[index]

    def __len__(self) -> int:
        return len(self._names())

    def __repr__(self) -> str:
        return repr(self._names())


#: Library → (import name, pip extra).
LIBRARIES: Mapping[str, tuple[str, str]] = _LibraryView(
    lambda lib: (lib.import_name, lib.extra), "Library → (import name, pip extra)."
)

#: The default clean fp32 participants, in display order.
DEFAULT_LIBRARIES: Sequence[str] = _DefaultLibraries()

#: Library → configuration name → settings. ``""`` is the default configuration.
#:
#: A settings key ``"env"`` holds environment variables the participant's worker process
#: starts with (settings a library reads at import, such as ``TF_ENABLE_ONEDNN_OPTS``).
CONFIGURATIONS: Mapping[str, Mapping[str, Mapping[str, Any]]] = _LibraryView(
    lambda lib: lib.configurations, "Library → configuration name → settings."
)

#: The fp64 reference participant.
REFERENCE64 = "torch[fp64]"
#: The fp32 reference participant (its deviation from fp64 is the noise floor).
REFERENCE32 = "torch"
#: Separates a faulty participant's name from its fault label (``paddle!bf16@neck.p4``).
FAULT_MARK = "!"


@dataclass(frozen=True)
class Participant:
    """One library in one configuration; ``version``: a release of it run from its own
    environment (``""``: the library of anpred's environment).
    """

    name: str
    library: str
    config: str = ""
    settings: Mapping[str, Any] = field(default_factory=dict)
    version: str = ""

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "name": self.name,
            "library": self.library,
            "config": self.config,
            "settings": dict(self.settings),
            **({"version": self.version} if self.version else {}),
        }

    def descriptor(self) -> Library:
        """The library descriptor this participant runs (a release's for ``lib@version``)."""
        if self.version:
            return version_library(self.library, self.version)
        return get_library(self.library)

    def environment(self) -> dict[str, str]:
        """Return the environment variables this participant's worker must start with."""
        return {str(k): str(v) for k, v in dict(self.settings.get("env") or {}).items()}


def is_available(library: str) -> bool:
    """Return whether ``library`` is importable (without importing it).

    Raises:
        UsageError: Unknown library.
    """
    return get_library(library).available()


def parse_participant(spec: str) -> Participant:
    """Parse ``library``, ``library[config]``, ``library@version`` or
    ``library@version[config]`` (nothing is built or installed here).

    Raises:
        UsageError: Unknown library or configuration, a library whose releases cannot be
            participants, or a malformed version.
    """
    spec = spec.strip()
    named, _, rest = spec.partition("[")
    config = rest.rstrip("]") if rest else ""
    library, version = split_spec(named)
    if VERSION_MARK in named and not version:
        raise UsageError(f"{spec!r}: give the release after '@' (e.g. onnxruntime@1.17.3)")
    descriptor = version_library(library, version) if version else get_library(library)
    configs = descriptor.configurations
    if config not in configs:
        choices = ", ".join(descriptor.participant_name(c) for c in configs if c)
        raise UsageError(f"unknown configuration {spec!r}; {named} has {choices or 'none'}")
    settings = copy.deepcopy(dict(configs[config]))  # the participant's own, never the registry's
    return Participant(descriptor.participant_name(config), library, config, settings, version)


#: ``--libs`` word for every deployment runtime (:mod:`anpred.library.runtimes`).
RUNTIMES = "runtimes"


def runtime_participants() -> list[Participant]:
    """``--libs runtimes``: every deployment runtime whose environment is built, in its
    default configuration.

    Raises:
        UsageError: None is built (``make runtimes``).
    """
    from anpred.library import Loads

    runtimes = [lib for lib in libraries() if lib.loads == Loads.CONVERTED_ARTIFACT]
    found = [parse_participant(lib.name) for lib in runtimes if lib.available()]
    if runtimes and not found:
        raise UsageError(
            f"no deployment runtime is installed ({', '.join(lib.name for lib in runtimes)}); "
            "build their environments with: make runtimes"
        )
    return found


def parse_participants(specs: Sequence[str] | str | None) -> list[Participant]:
    """Parse ``--libs`` (comma list, default ``all``).

    ``all`` means every installed library in its default configuration; it may be combined
    with configurations, e.g. ``all,torch[bf16],jax[nojit]``. ``runtimes`` means every
    deployment runtime whose environment is built (``all`` leaves them out).

    Raises:
        UsageError: Unknown names, duplicates, or a named library that is not installed.
    """
    if specs is None or specs == "all" or specs == ["all"]:
        return [parse_participant(lib) for lib in DEFAULT_LIBRARIES if is_available(lib)]
    items = specs.split(",") if isinstance(specs, str) else [s for x in specs for s in x.split(",")]
    participants = []
    for item in (i.strip() for i in items):
        if item == "all":
            participants += parse_participants("all")
        elif item == RUNTIMES:
            participants += runtime_participants()
        elif item:
            participants.append(parse_participant(item))
    names = [p.name for p in participants]
    if len(set(names)) != len(names):
        raise UsageError(f"participant listed twice in {','.join(names)}")
    for p in participants:
        if p.version:  # a release: its environment, built now the first time
            ensure_version_env(p.library, p.version, say=to_stderr)
        elif not is_available(p.library):
            raise UsageError(
                f"library '{p.library}' is not installed; "
                f"install it with: {get_library(p.library).install_hint()}"
            )
    return participants


def precision_of(name: str) -> Precision:
    """The precision ``name`` declares in its library descriptor (a faulty participant's is
    its clean participant's; a name no registered library knows is fp32).
    """
    try:
        participant = parse_participant(name.split(FAULT_MARK, 1)[0])
    except UsageError:
        return Precision()
    return get_library(participant.library).precision(participant.config)


def precision_classes(names: Sequence[str]) -> dict[str, str]:
    """``{participant: the precision class it is judged in}`` for ``names``."""
    return {name: precision_of(name).judged_class for name in names}


def ideal_participants(
    participants: Sequence[Participant], present: Sequence[str] = ()
) -> list[Participant]:
    """The ideal references the reduced-precision classes among ``participants`` need
    (``torch[ideal-bf16]``...), in the order their classes first appear, but those named in
    ``participants`` or ``present`` (participants a run already has).
    """
    classes = dict.fromkeys(precision_of(p.name).judged_class for p in participants)
    have = {*present, *(p.name for p in participants)}
    names = [ideal_reference(c) for c in classes if c != FP32]
    return [parse_participant(n) for n in names if n not in have]
