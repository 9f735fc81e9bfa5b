"""What a port is, how it becomes a participant, and the transform that hands it to a worker.

A *port* is the user's own implementation of the reference module in another library
(a ``paddle.nn.Layer`` or a ``keras.Model`` written by hand, weights transferred by the
user), named by a
``file.py:function`` that returns it. It runs as the participant ``<library>-port``, in its
library's worker, through its own code: the :class:`PortTransform` planned for that
participant replaces the worker's model by the port (``ModelJob.port``), and the port
runner of its library (:data:`PORT_RUNNERS`) captures the outputs of the port's layers
that stand for the reference's anchors: the layers named like the reference's anchor
modules, or those ``anchor_map`` names (port layer path -> reference anchor).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from anpred.errors import UsageError
from anpred.interchange.transform import Transform, register_transform
from anpred.participants import Participant, parse_participant

if TYPE_CHECKING:
    from anpred.backends.base import ModelJob, Runner

#: Suffix of a port's participant name (``paddle-port``).
PORT_SUFFIX = "-port"
#: The runner of each library's ports (``module:Class``), imported in the worker only.
PORT_RUNNERS = {
    "paddle": "anpred.backends.paddle_port_runner:PaddlePortRunner",
    "tensorflow": "anpred.backends.keras_port_runner:KerasPortRunner",
}
#: Key of the ports in ``RunOptions.extra``: library -> port spec.
EXTRA_PORTS = "ports"


@dataclass(frozen=True)
class PortSpec:
    """One port.

    Attributes:
        library: The library it is written in (``paddle``).
        source: ``path/to/file.py:function`` returning the port (absolute path).
        anchor_map: ``(port layer path, reference anchor)`` pairs; empty: the layers named
            like the reference's anchor modules.
    """

    library: str
    source: str
    anchor_map: tuple[tuple[str, str], ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {
            "library": self.library,
            "source": self.source,
            "anchor_map": [list(pair) for pair in self.anchor_map],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PortSpec:
        """Inverse of :meth:`to_dict`."""
        pairs = tuple((str(a), str(b)) for a, b in data.get("anchor_map") or ())
        return cls(str(data["library"]), str(data["source"]), pairs)


def port_specs(extra: Mapping[str, Any]) -> list[PortSpec]:
    """The ports ``RunOptions.extra`` holds."""
    return [PortSpec.from_dict(d) for d in (extra.get(EXTRA_PORTS) or [])]


def port_participant(spec: PortSpec) -> Participant:
    """The participant that runs ``spec`` (its library's default settings).

    Raises:
        UsageError: No port runner for that library.
    """
    if spec.library not in PORT_RUNNERS:
        raise UsageError(
            f"ports in {spec.library} are not supported yet (supported: "
            f"{', '.join(sorted(PORT_RUNNERS))})"
        )
    base = parse_participant(spec.library)
    return Participant(f"{spec.library}{PORT_SUFFIX}", spec.library, "", dict(base.settings))


def is_port(participant: str) -> bool:
    """Whether ``participant`` names a user's port."""
    return participant.endswith(PORT_SUFFIX)


def port_transforms(specs: list[PortSpec]) -> dict[str, list[dict[str, Any]]]:
    """The transform records that hand each port to its participant's worker."""
    return {f"{s.library}{PORT_SUFFIX}": [PortTransform(s).record()] for s in specs}


def port_runner(spec: PortSpec) -> type[Runner]:
    """The runner class of ``spec``'s library (imported here: worker processes only)."""
    module, _, name = PORT_RUNNERS[spec.library].partition(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


@register_transform
class PortTransform(Transform):
    """The worker runs the user's port instead of the export."""

    kind = "port"

    def __init__(self, spec: PortSpec) -> None:
        self.spec = spec

    def params(self) -> dict[str, Any]:
        return {"port": self.spec.to_dict()}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> PortTransform:
        return cls(PortSpec.from_dict(params["port"]))

    def model(self, job: ModelJob) -> ModelJob:
        return replace(job, port=self.spec)


def ports_extra(
    ports: Mapping[str, str] | Sequence[str] | None,
    anchor_map: Mapping[str, Mapping[str, str]] | str | None,
) -> dict[str, Any]:
    """The ``RunOptions.extra`` entry of ``--ports`` / ``--anchor-map`` (``{}``: no port).

    Args:
        ports: ``{library: "path/to/file.py:function"}``, or ``LIBRARY=FILE.py:FUNCTION``
            strings (``--ports``, repeatable).
        anchor_map: ``{library: {port layer: reference anchor}}``, or the path of a JSON
            file holding it (``--anchor-map``).

    Raises:
        UsageError: A malformed value, a missing file, a library without a port runner, or
            a map for a library that has no port.
    """
    import json
    from pathlib import Path

    from anpred.interchange.user_module import check_module_source, resolved_source

    if isinstance(ports, str):
        ports = [ports]
    if ports is not None and not isinstance(ports, Mapping):
        pairs = [p.partition("=") for p in ports]
        if any(not sep or not lib or not src for lib, sep, src in pairs):
            raise UsageError(f"--ports takes LIBRARY=path/to/file.py:function, got {ports!r}")
        ports = {lib.strip(): src.strip() for lib, _, src in pairs}
    if isinstance(anchor_map, str):
        path = Path(anchor_map)
        if not path.is_file():
            raise UsageError(f"--anchor-map {anchor_map!r} does not exist")
        try:
            anchor_map = json.loads(path.read_text())
        except ValueError as err:
            raise UsageError(f"--anchor-map {anchor_map!r} is not JSON ({err})") from None
    ports, anchor_map = dict(ports or {}), dict(anchor_map or {})
    unknown = sorted(set(anchor_map) - set(ports))
    if unknown:
        raise UsageError(f"anchor_map names {unknown[0]!r}, which has no port")
    if not ports:
        return {}
    specs = []
    for library, source in ports.items():
        if not isinstance(source, str):
            raise UsageError(f"the port of {library} must be 'path/to/file.py:function'")
        check_module_source(source)
        given = anchor_map.get(library) or {}
        if not isinstance(given, Mapping):
            raise UsageError(f"anchor_map[{library!r}] must map port layers to anchors")
        spec = PortSpec(
            library, resolved_source(source), tuple((str(k), str(v)) for k, v in given.items())
        )
        port_participant(spec)  # a library without a port runner: one line now
        specs.append(spec.to_dict())
    return {EXTRA_PORTS: specs}
