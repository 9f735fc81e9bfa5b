"""Fuzz: checkpoints for ``--weights`` (pickles naming globals outside the allow-list).

A checkpoint is a pickle: loading it calls the globals it names with arguments from the
file. Every hostile checkpoint here names a callable whose call leaves a *marker* file
(``torch.serialization.save``, ``torch.hub.load`` of a folder with a ``hubconf.py``,
``os.system``, ``builtins.exec``...), in the legacy pickle format and in torch's zip
format. The property: it is refused with a one-line :class:`WeightsError` (exit 2 from the
CLI) and the marker never appears. Classes a pickled ultralytics model needs (torch
modules, ``OrderedDict``) still load.

The in-process cases call the loader directly (cheap); the CLI cases export a zoo model in
a torch worker and are marked slow.
"""

from __future__ import annotations

import io
import pickle
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from fuzz_support import Cases, case_dir, fuzz, run_cli
from hypothesis import given
from hypothesis import strategies as st

from anpred.errors import WeightsError

torch = pytest.importorskip("torch")

MARKER = "pwned"


def _targets(folder: Path) -> dict[str, tuple[str, str, tuple[object, ...]]]:
    """Name → (module, global, args) of a call that creates ``folder / MARKER``."""
    marker = str(folder / MARKER)
    return {
        "torch.serialization.save": ("torch.serialization", "save", ("x", marker)),
        "torch.save": ("torch", "save", ("x", marker)),
        "torch.hub.load": ("torch.hub", "load", (str(folder), "entry", "local")),
        "os.system": ("os", "system", (f"touch {marker}",)),
        "posix.system": ("posix", "system", (f"touch {marker}",)),
        "builtins.exec": ("builtins", "exec", (f"open({marker!r}, 'w')",)),
        "subprocess.call": ("subprocess", "call", (["touch", marker],)),
        "numpy.save": ("numpy", "save", (marker, [1])),
        "collections.namedtuple": ("collections", "namedtuple", ("X", "a")),
        "pathlib.Path": ("pathlib", "Path", (marker,)),
        "ultralytics.utils.files.increment_path": (
            "ultralytics.utils.files", "increment_path", (marker, False, "", True)),
        "torch.nn.modules.linear.Linear": ("torch.nn.modules.linear", "Linear", (2, 2)),
        "collections.OrderedDict": ("collections", "OrderedDict", ()),
    }


#: Targets that are plain classes a pickled model legitimately holds: they must load.
HARMLESS = {"torch.nn.modules.linear.Linear", "collections.OrderedDict"}


def _pickle_call(module: str, name: str, args: tuple[object, ...], wrap: bool) -> bytes:
    """Protocol-2 pickle of ``module.name(*args)`` (inside ``{"model": ...}`` if ``wrap``)."""
    pushed = pickle.dumps(args, protocol=2)[2:-1]  # the opcodes that push the tuple
    call = b"c" + module.encode() + b"\n" + name.encode() + b"\n" + pushed + b"R"
    if wrap:
        call = b"}" + pickle.dumps("model", protocol=2)[2:-1] + call + b"s"
    return b"\x80\x02" + call + b"."


def _zip_checkpoint(payload: bytes) -> bytes:
    """A torch zip checkpoint whose ``data.pkl`` is ``payload``."""
    buffer = io.BytesIO()
    torch.save({"x": 1}, buffer)
    source = zipfile.ZipFile(io.BytesIO(buffer.getvalue()))
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_STORED) as target:
        for info in source.infolist():
            data = payload if info.filename.endswith("/data.pkl") else source.read(info)
            target.writestr(info.filename, data)
    return out.getvalue()


@dataclass(frozen=True)
class HostileCheckpoint:
    """A checkpoint calling ``target`` (see :func:`_targets`) when unpickled."""

    target: str
    zip_format: bool  # False: a bare pickle, which is no torch checkpoint at all
    wrapped: bool

    def write(self, folder: Path) -> Path:
        (folder / "hubconf.py").write_text(
            f"open({str(folder / MARKER)!r}, 'w').close()\ndef entry():\n    return 1\n"
        )
        module, name, args = _targets(folder)[self.target]
        payload = _pickle_call(module, name, args, self.wrapped)
        path = folder / "weights.pt"
        path.write_bytes(_zip_checkpoint(payload) if self.zip_format else payload)
        return path


def checkpoints() -> st.SearchStrategy[HostileCheckpoint]:
    return st.builds(HostileCheckpoint, st.sampled_from(sorted(_targets(Path("/")))),
                     st.booleans(), st.booleans())


def test_fuzz_checkpoint_loader_in_process() -> None:
    from anpred.zoo.weights import _safe_load

    cases = Cases("--weights (checkpoint loader, in process)")

    @fuzz(short_examples=30, cheap=True)
    @given(checkpoint=checkpoints())
    def case(checkpoint: HostileCheckpoint) -> None:
        problems = []
        with case_dir() as tmp:
            path = checkpoint.write(tmp)
            try:
                _safe_load(path)
            except WeightsError as err:
                if "\n" in str(err):
                    problems.append("multi-line error")
                if checkpoint.target in HARMLESS and checkpoint.zip_format:
                    problems.append(f"a harmless checkpoint refused: {err}")
            except Exception as err:  # noqa: BLE001 - any other exception is the finding
                problems.append(f"{err.__class__.__name__}: {err}")
            else:
                if checkpoint.target not in HARMLESS:
                    problems.append("loaded a checkpoint that calls " + checkpoint.target)
            if (tmp / MARKER).exists():
                problems.append("the pickle ran code: the marker file exists")
        cases.add(checkpoint, problems)

    case()
    cases.finish()


@pytest.mark.slow
@pytest.mark.parametrize("target", ["torch.serialization.save", "torch.hub.load", "os.system"])
def test_cli_refuses_a_hostile_checkpoint_and_runs_nothing(target: str) -> None:
    cases = Cases("run --weights")
    with case_dir() as tmp:
        path = HostileCheckpoint(target, zip_format=True, wrapped=True).write(tmp)
        result = run_cli(
            ["run", "resnet50", "--weights", str(path), "--libs", "torch", "--images", "1",
             "--no-isolation", "--out", str(tmp / "o")],
            cwd=tmp,
            timeout=600,
        )
        ran = ["the pickle ran code: the marker file exists"] if (tmp / MARKER).exists() else []
        cases.check(target, result, expect="refused", extra=ran)
    cases.finish()
