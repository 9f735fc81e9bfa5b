"""Offline guard of deployment runtimes' workers: no network, no installs, at run time.

Converters reach out when they are called (measured in ``../shared/ENVIRONMENT.md``):
MNN's Python converter entry point runs ``pip install`` of a telemetry SDK and calls home,
x2paddle sends feedback, onnx2tf downloads a calibration file. A worker of a converted
runtime therefore runs with:

- :func:`offline_environment`: variables set before it starts (pip without index, without
  configuration and so without find-links; hub libraries offline);
- :func:`install_guard`: an audit hook (:func:`sys.addaudithook`, which cannot be removed)
  that refuses every network connection and name lookup except to this machine's loopback,
  and every process start of an installer (``pip``, ``python -m pip``, ``ensurepip``,
  ``uv pip``, ``conda install``), and records each refusal; the worker writes them into
  its status record (``offline``).

An audit hook sees what Python code does (``socket``, ``subprocess``, ``os.system``...); a
C++ library opening a socket by itself is not seen. The test that runs a conversion in a
network namespace without network (``unshare -rn``) covers that case.
"""

from __future__ import annotations

import ipaddress
import os
import re
import socket
import sys
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

#: Refusals kept in the record (the first ones; the count is always exact).
MAX_RECORDED = 50

_INSTALLER = re.compile(
    r"(^| )(pip[0-9.]*|ensurepip|easy_install)( |$)|(^| )-m ?(pip|ensurepip)( |$)"
    r"|(^| )uv pip( |$)|(^| )(conda|mamba|micromamba) install( |$)"
)
_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost", ""}


def offline_environment() -> dict[str, str]:
    """Variables a converted runtime's worker starts with: pip and model hubs offline."""
    return {
        "PIP_NO_INDEX": "1",
        "PIP_CONFIG_FILE": os.devnull,  # drops find-links and extra index URLs too
        "PIP_NO_INPUT": "1",
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "YOLO_OFFLINE": "1",
        "ANPRED_OFFLINE": "1",
    }


class NetworkBlocked(ConnectionRefusedError):
    """A network access refused by the offline guard."""


class InstallBlocked(PermissionError):
    """An installer process refused by the offline guard."""


def _is_loopback(host: Any) -> bool:
    if host is None:
        return True
    if isinstance(host, bytes):
        host = host.decode(errors="replace")
    host = str(host).strip("[]").lower()
    if host in _LOOPBACK_NAMES or host.startswith("127.") or host == "::1":
        return True
    return host.startswith("/")  # a Unix socket path


def _is_numeric(host: Any) -> bool:
    try:
        ipaddress.ip_address(os.fsdecode(host) if isinstance(host, bytes) else str(host))
    except ValueError:
        return False
    return True


def is_installer(command: Any) -> bool:
    """Whether ``command`` (an argument list or a shell string) starts an installer."""
    if isinstance(command, str | bytes):
        words = os.fsdecode(command).split()
    elif isinstance(command, Iterable):
        words = [os.fsdecode(w) if isinstance(w, str | bytes) else str(w) for w in command]
    else:
        return False
    tokens = " ".join(os.path.basename(w) if "/" in w else w for w in words)
    return bool(_INSTALLER.search(tokens))


@dataclass
class OfflineGuard:
    """The refusals of this process's guard (see :func:`install_guard`)."""

    blocked: list[dict[str, str]] = field(default_factory=list)
    count: int = 0

    def refuse(self, kind: str, target: str, error: type[OSError]) -> None:
        """Record a refusal and raise ``error`` (the audit event's operation is aborted)."""
        self.count += 1
        if len(self.blocked) < MAX_RECORDED:
            self.blocked.append({"kind": kind, "target": target[:200]})
        raise error(f"anpred's offline guard refused {kind} {target[:200]}")

    def record(self) -> dict[str, Any]:
        """JSON-ready record for the worker's status."""
        return {"guarded": True, "refused": self.count, "blocked": list(self.blocked)}

    def hook(self, event: str, args: tuple[Any, ...]) -> None:
        """The audit hook."""
        if event == "socket.connect" or event == "socket.sendto":
            sock, address = args[0], args[1]
            family = getattr(sock, "family", None)
            if family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(address[0]):
                self.refuse("network connection to", f"{address[0]}:{address[1]}", NetworkBlocked)
        elif event == "socket.getaddrinfo":  # a numeric address needs no lookup
            if not _is_loopback(args[0]) and not _is_numeric(args[0]):
                self.refuse("name lookup of", str(args[0]), socket.gaierror)
        elif event in ("socket.gethostbyname", "socket.gethostbyname_ex", "socket.gethostbyaddr"):
            if not _is_loopback(args[0]):
                self.refuse("name lookup of", str(args[0]), socket.gaierror)
        elif event == "subprocess.Popen":
            if is_installer(args[1]):
                self.refuse("installer process", _text(args[1]), InstallBlocked)
        elif event == "os.system":
            if is_installer(args[0]):
                self.refuse("installer process", _text(args[0]), InstallBlocked)
        elif event in ("os.exec", "os.posix_spawn", "os.spawn"):
            argv = args[2] if event == "os.spawn" else args[1]
            if is_installer(argv):
                self.refuse("installer process", _text(argv), InstallBlocked)


def _text(command: Any) -> str:
    if isinstance(command, str | bytes):
        return os.fsdecode(command)
    try:
        return " ".join(os.fsdecode(w) if isinstance(w, str | bytes) else str(w) for w in command)
    except TypeError:
        return str(command)


_GUARD: OfflineGuard | None = None


def install_guard() -> OfflineGuard:
    """Install the guard in this process (once; later calls return the same guard)."""
    global _GUARD
    if _GUARD is None:
        _GUARD = OfflineGuard()
        os.environ.update(offline_environment())
        sys.addaudithook(_GUARD.hook)
    return _GUARD
