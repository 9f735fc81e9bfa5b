"""What the machine a run ran on can do: CPU model and the instruction sets that change
numerics (bf16/fp16 arithmetic, AVX-512, AMX).

Libraries pick kernels by CPU feature: OpenVINO computes ``bf16`` only where the CPU has
AVX512-BF16 or AMX, oneDNN's bf16 paths likewise, and fp16 arithmetic needs AVX512-FP16.
A run's results therefore depend on the machine; this record is stored with them so that a
reader knows which machine produced a number. Reading it imports no DL library.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

#: CPU flags (as Linux's /proc/cpuinfo names them) that change what libraries compute.
NUMERIC_FLAGS = (
    "sse4_2",
    "avx",
    "avx2",
    "fma",
    "f16c",
    "avx512f",
    "avx512_vnni",
    "avx512_bf16",
    "avx512_fp16",
    "amx_tile",
    "amx_bf16",
    "amx_fp16",
)


def cpu_flags(cpuinfo: str | None = None) -> set[str]:
    """The CPU's feature flags (empty where the platform does not expose them).

    Args:
        cpuinfo: Text of ``/proc/cpuinfo`` (read from the machine when omitted).
    """
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return set()
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return set(value.split())
    return set()


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name, or the platform's processor string."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            cpuinfo = ""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return platform.processor() or platform.machine()


def describe_machine(cpuinfo: str | None = None) -> dict[str, Any]:
    """A JSON-ready record of the machine: architecture, CPU, numeric features, cores.

    ``bf16_arithmetic`` and ``fp16_arithmetic`` say whether the CPU computes in those
    formats natively (libraries then really round; without them some fall back to f32).
    """
    flags = cpu_flags(cpuinfo)
    return {
        "arch": platform.machine(),
        "cpu": cpu_model(cpuinfo),
        "cores": os.cpu_count(),
        "features": sorted(f for f in NUMERIC_FLAGS if f in flags),
        "bf16_arithmetic": bool(flags & {"avx512_bf16", "amx_bf16"}),
        "fp16_arithmetic": bool(flags & {"avx512_fp16", "amx_fp16"}),
    }
