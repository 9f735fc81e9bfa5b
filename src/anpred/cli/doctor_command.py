"""``anpred doctor``: what is installed, and whether this machine can run a typical run.

The first command to run when something is off. It says which libraries are installed (and
their versions), which deployment-runtime environments are built (and the command that
builds each one that is not), the CPU's numeric features (they decide what bf16/fp16
participants compute), and the free memory and disk against what a typical run needs.
Nothing is imported from a DL library and no process is started.

Exit codes: 0 when a typical run can go ahead; 1 when something it needs is missing (each
problem is one line, with what to do).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

from anpred import __version__
from anpred.execution.resources import DEFAULT_SHARE, available_memory, format_size
from anpred.library import Library, libraries
from anpred.library.environments import BUILD_HINT, build_command, missing_reason, versions_root
from anpred.library.versions import built_releases
from anpred.machine import describe_machine

#: What the memory and disk checks measure against: ``anpred run yolov8n --images 8`` with
#: every library (six participants and the fp64 reference, stage anchors, ``--parallel 2``).
TYPICAL_RUN = "yolov8n, six libraries, 8 inputs"
#: Its peak resident memory, children included: 1924 MB (docs/scaling.json, curve "anpred
#: yolov8n stage", n=8; ``python benchmarks/bench_scaling.py`` reproduces it).
TYPICAL_MEMORY = 1924 * 10**6
#: Its peak disk use under ``--out`` (the captures before they are pruned): 2146 MB (same
#: measurement, ``peak_disk_mb``).
TYPICAL_DISK = 2146 * 10**6
#: Libraries without which no run is possible: the zoo and the fp64 reference are torch.
REQUIRED = ("torch",)


@dataclass(frozen=True)
class LibraryState:
    """One library of the main environment."""

    name: str
    version: str | None
    install: str


@dataclass(frozen=True)
class RuntimeEnvState:
    """One deployment-runtime environment and the runtimes that live in it."""

    environment: str
    runtimes: tuple[str, ...]
    built: bool
    reason: str
    build: str


@dataclass
class Checkup:
    """Everything ``anpred doctor`` found; ``problems`` empty when a typical run can go."""

    anpred: str
    python: str
    prefix: str
    libraries: list[LibraryState]
    runtime_envs: list[RuntimeEnvState]
    machine: dict[str, object]
    memory_available: int | None
    memory_budget: int | None
    disk_free: int | None
    disk_folder: str
    compiler: str | None
    problems: list[str] = field(default_factory=list)
    #: Built library-release environments (``LIB@VERSION``): participant, size, folder.
    releases: list[dict[str, object]] = field(default_factory=list)


def _main_libraries(found: list[Library]) -> list[LibraryState]:
    rows = []
    for lib in found:
        if lib.environment:
            continue
        available = lib.available()
        rows.append(LibraryState(lib.name, lib.version() if available else None,
                                 "" if available else lib.install_hint()))  # fmt: skip
    return rows


def _runtime_envs(found: list[Library]) -> list[RuntimeEnvState]:
    by_env: dict[str, list[str]] = {}
    for lib in found:
        if lib.environment:
            by_env.setdefault(lib.environment, []).append(lib.name)
    rows = []
    for env, runtimes in by_env.items():
        reason = missing_reason(env)
        rows.append(RuntimeEnvState(env, tuple(runtimes), not reason, reason, build_command(env)))
    return rows


def _free_disk(folder: Path) -> tuple[int | None, Path]:
    place = folder.absolute()
    while not place.exists() and place != place.parent:
        place = place.parent
    try:
        return shutil.disk_usage(place).free, place
    except OSError:
        return None, place


def checkup(out: Path) -> Checkup:
    """Inspect this installation and machine.

    Args:
        out: Where runs would write (the disk check looks at its file system).
    """
    found = libraries()
    libs = _main_libraries(found)
    available = available_memory()
    budget = int(available * DEFAULT_SHARE) if available else None
    free, place = _free_disk(out)
    result = Checkup(
        anpred=__version__,
        python=sys.version.split()[0],
        prefix=sys.prefix,
        libraries=libs,
        runtime_envs=_runtime_envs(found),
        machine=describe_machine(),
        memory_available=available,
        memory_budget=budget,
        disk_free=free,
        disk_folder=str(place),
        compiler=shutil.which("g++") or shutil.which("c++"),
        releases=[
            {"participant": f"{r['library']}@{r['version']}", "bytes": r.get("bytes"),
             "path": str(r["path"])}
            for r in built_releases()
        ],
    )
    installed = [lib.name for lib in libs if lib.version is not None]
    for name in REQUIRED:
        lib = next((x for x in libs if x.name == name), None)
        if lib is not None and lib.version is None:
            result.problems.append(
                f"{name} is missing: the zoo and the fp64 reference need it ({lib.install})"
            )
    if len(installed) < 2:
        result.problems.append(
            f"{len(installed)} librar{'y' if len(installed) == 1 else 'ies'} installed: a "
            "comparison needs two (`make env` installs all six)"
        )
    if budget is not None and budget < TYPICAL_MEMORY:
        result.problems.append(
            f"memory: a run may use {format_size(budget)} ({DEFAULT_SHARE:.0%} of the "
            f"{format_size(available or 0)} available), a typical run ({TYPICAL_RUN}) peaks at "
            f"{format_size(TYPICAL_MEMORY)}; close other programs or run fewer libraries"
        )
    if free is not None and free < TYPICAL_DISK:
        result.problems.append(
            f"disk: {format_size(free)} free in {place}, a typical run ({TYPICAL_RUN}) writes "
            f"{format_size(TYPICAL_DISK)} at its peak; free some space or pass --out elsewhere"
        )
    return result


def _size(n: int | None) -> str:
    return "unknown" if n is None else format_size(n)


def render(result: Checkup) -> str:
    """The terminal text of a checkup."""
    machine = result.machine
    lines = [f"anpred {result.anpred}, Python {result.python} ({result.prefix})", "", "libraries:"]
    for lib in result.libraries:
        state = lib.version if lib.version is not None else f"missing ({lib.install})"
        lines.append(f"  {lib.name:<12} {state}")
    lines += ["", f"deployment-runtime environments (--libs runtimes; `{BUILD_HINT}` builds all):"]
    for env in result.runtime_envs:
        prefix = f"its environment {env.environment!r} "
        state = "built" if env.built else env.reason.removeprefix(prefix)
        lines.append(f"  {env.environment:<17} {state}  ({', '.join(env.runtimes)})")
    lines += ["", f"library releases built (--libs LIB@VERSION; in {versions_root()}):"]
    for release in result.releases:
        size = release["bytes"]
        shown = format_size(size) if isinstance(size, int) else "?"
        lines.append(f"  {release['participant']:<24} {shown}")
    if not result.releases:
        lines.append("  none (each is built on first use)")
    features = ", ".join(machine["features"]) or "none found"  # type: ignore[arg-type]
    lines += [
        "",
        f"cpu: {machine['cpu']}, {machine['cores']} cores ({machine['arch']})",
        f"  numeric features: {features}",
        f"  bf16 arithmetic: {'yes' if machine['bf16_arithmetic'] else 'no'}; "
        f"fp16 arithmetic: {'yes' if machine['fp16_arithmetic'] else 'no'}",
        "  (without them some bf16/fp16 participants compute in f32; each run records which)",
        f"  c++ compiler (tvm's conversion): {result.compiler or 'none found'}",
        "",
        f"memory: {_size(result.memory_available)} available, a run may use "
        f"{_size(result.memory_budget)}; a typical run ({TYPICAL_RUN}) peaks at "
        f"{format_size(TYPICAL_MEMORY)}",
        f"disk: {_size(result.disk_free)} free in {result.disk_folder}; a typical run "
        f"writes {format_size(TYPICAL_DISK)} at its peak",
        "",
    ]
    if result.problems:
        lines += [f"problem: {p}" for p in result.problems]
    else:
        lines.append("ok: a typical run can go ahead")
    return "\n".join(lines)


def cmd_doctor(args: argparse.Namespace) -> int:
    """Print the checkup; 0 when a typical run can go ahead, 1 otherwise."""
    result = checkup(Path(args.out))
    if args.json:
        print(json.dumps(asdict(result), indent=1))
    else:
        print(render(result))
    return 1 if result.problems else 0


def add_doctor_parser(sub: argparse._SubParsersAction, common: argparse.ArgumentParser) -> None:  # type: ignore[type-arg]
    """Register ``anpred doctor``."""
    doctor = sub.add_parser(
        "doctor",
        parents=[common],
        help="what is installed and whether this machine can run a typical run",
        description="Libraries and versions, deployment-runtime environments (built or not, "
        "and the command that builds each), CPU numeric features, and free memory and disk "
        f"against a typical run ({TYPICAL_RUN}). Exit 0 when it can go ahead, 1 when "
        "something is missing (one line each, with what to do).",
    )
    doctor.add_argument(
        "--out", default="runs", metavar="DIR",
        help="where runs will write: its file system's free space is checked (default runs)",
    )  # fmt: skip
    doctor.add_argument("--json", action="store_true", help="print JSON")
    doctor.set_defaults(handler=cmd_doctor)
