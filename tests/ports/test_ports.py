"""Hand-written paddle and Keras ports of a torch module, run beside the libraries
(issue 38)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import anpred
from anpred.errors import UsageError
from anpred.store.outcome import Status

HERE = Path(__file__).parent
ROOT = HERE.parents[1]
#: Keras layer (keras_ports.py) -> reference anchor: Keras names differ from module paths.
KERAS_ANCHOR_MAP = {
    "stem_conv": "stem.0",
    "stem_act": "stem.1",
    "body_conv1": "body.0",
    "body_gelu": "body.1",
    "body_conv2": "body.2",
    "pool": "pool",
}


def _port_files(tmp_path: Path, weights: Path) -> tuple[Path, Path]:
    """``port_paddle.py`` and ``port_keras.py``: one file per library (importing paddle and
    tensorflow in one process crashes it)."""
    head = f"import sys\nsys.path.insert(0, {str(HERE)!r})\nW = {str(weights)!r}\n"
    paddle = tmp_path / "port_paddle.py"
    paddle.write_text(
        head + "from paddle_ports import build\n"
        "def clean():\n    return build(W)\n"
        "def tanh_gelu():\n    return build(W, approximate=True)\n"
        "def wrong_weight():\n    return build(W, wrong='body.2.weight')\n"
    )
    keras = tmp_path / "port_keras.py"
    keras.write_text(
        head + "from keras_ports import build\n"
        "def keras_clean():\n    return build(W)\n"
        "def keras_tanh_gelu():\n    return build(W, approximate=True)\n"
    )
    return paddle, keras


@pytest.fixture
def reference(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[object, Path, Path]:
    import torch

    monkeypatch.syspath_prepend(str(ROOT / "tests" / "interchange"))
    from user_modules import SmallCnn

    torch.manual_seed(0)
    model = SmallCnn().eval()
    weights = tmp_path / "weights.npz"
    np.savez(weights, **{k: v.numpy() for k, v in model.state_dict().items()})
    return (model, *_port_files(tmp_path, weights))


def test_a_port_in_a_library_without_a_port_runner_is_one_line(
    reference: tuple[object, Path, Path], tmp_path: Path
) -> None:
    import torch

    model, port, _ = reference
    with pytest.raises(UsageError, match="ports in jax are not supported yet"):
        anpred.run(model, example_inputs=torch.zeros(1, 3, 32, 32), out=tmp_path / "r",
                   ports={"jax": f"{port}:clean"})  # fmt: skip
    with pytest.raises(UsageError, match="anchor_map names 'paddle', which has no port"):
        anpred.run(model, example_inputs=torch.zeros(1, 3, 32, 32), out=tmp_path / "r",
                   anchor_map={"paddle": {"a": "b"}})  # fmt: skip


@pytest.mark.slow
def test_a_clean_port_agrees_and_a_changed_activation_is_localized(
    reference: tuple[object, Path, Path], tmp_path: Path
) -> None:
    import torch

    model, port, _ = reference
    runs = {}
    for function in ("clean", "tanh_gelu", "wrong_weight"):
        runs[function] = anpred.run(
            model, example_inputs=torch.zeros(1, 3, 32, 32), libs="torch,onnxruntime", images=1,
            out=tmp_path / function, progress=None, drill=function == "tanh_gelu",
            ports={"paddle": f"{port}:{function}"},
        )  # fmt: skip
    for run in runs.values():
        assert {p.participant: p.status for p in run.participants} == {
            "torch": Status.OK, "onnxruntime": Status.OK, "paddle-port": Status.OK,
        }  # fmt: skip
    assert not runs["clean"].findings
    # GELU's tanh approximation: flagged from the GELU's anchor on, not before
    flagged = {f.anchor for f in runs["tanh_gelu"].findings if f.participant == "paddle-port"}
    assert "body.1" in flagged and not flagged & {"stem.0", "stem.1", "body.0"}
    assert runs["tanh_gelu"].localization.participants["paddle-port"].top_stage == "body.1"
    assert runs["tanh_gelu"].summary.drill is None  # a port has no graph to drill into
    # a wrong weight in body.2: flagged from body.2 on
    flagged = {f.anchor for f in runs["wrong_weight"].findings if f.participant == "paddle-port"}
    assert "body.2" in flagged and not flagged & {"stem.0", "stem.1", "body.0", "body.1"}


@pytest.mark.slow
def test_a_keras_port_runs_channels_last_with_an_anchor_map(
    reference: tuple[object, Path, Path], tmp_path: Path
) -> None:
    import torch

    model, _, port = reference
    runs = {}
    for function in ("keras_clean", "keras_tanh_gelu", "keras_clean-unmapped"):
        given = {} if function.endswith("unmapped") else {"tensorflow": KERAS_ANCHOR_MAP}
        runs[function] = anpred.run(
            model, example_inputs=torch.zeros(1, 3, 32, 32), libs="torch,onnxruntime", images=1,
            out=tmp_path / function, progress=None, drill=False,
            ports={"tensorflow": f"{port}:{function.split('-')[0]}"}, anchor_map=given,
        )  # fmt: skip
    for run in runs.values():
        record = next(p for p in run.participants if p.participant == "tensorflow-port")
        assert record.status is Status.OK
    assert not runs["keras_clean"].findings and not runs["keras_clean-unmapped"].findings
    # without a map: a layer named like the anchor's module (pool), else the next layer of
    # the anchor's shape, in call order
    unmapped = next(
        p for p in runs["keras_clean-unmapped"].participants if p.participant == "tensorflow-port"
    ).settings
    assert unmapped["anchor_map"] == {v: k for k, v in KERAS_ANCHOR_MAP.items()}
    assert unmapped["anchor_map_by"] == {
        a: "name" if a == "pool" else "order and shape" for a in KERAS_ANCHOR_MAP.values()
    }
    flagged = {f.anchor for f in runs["keras_tanh_gelu"].findings}
    assert "body.1" in flagged and not flagged & {"stem.0", "stem.1", "body.0"}


@pytest.mark.slow
def test_transformer_block_ports_with_another_layernorm_epsilon_are_flagged_at_the_norm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import torch

    monkeypatch.syspath_prepend(str(ROOT / "tests" / "interchange"))
    from user_modules import Block

    torch.manual_seed(0)
    model = Block().eval()
    weights = tmp_path / "block.npz"
    np.savez(weights, **{k: v.numpy() for k, v in model.state_dict().items()})
    ports = {}
    for library, module in (("paddle", "paddle_ports"), ("tensorflow", "keras_ports")):
        ports[library] = tmp_path / f"port_block_{library}.py"  # one library per file
        ports[library].write_text(
            f"import sys\nsys.path.insert(0, {str(HERE)!r})\nfrom {module} import build_block\n"
            f"def clean():\n    return build_block({str(weights)!r})\n"
            f"def eps6():\n    return build_block({str(weights)!r}, epsilon=1e-6)\n"
        )
    # one port per run: two ports with the same difference would make half the population
    for library, path in ports.items():
        runs = {
            function: anpred.run(
                model,
                example_inputs=torch.randn(1, 8, 16),
                libs="torch,onnxruntime",
                images=1,
                out=tmp_path / f"{library}-{function}",
                progress=None,
                drill=False,
                ports={library: f"{path}:{function}"},
            )  # fmt: skip
            for function in ("clean", "eps6")
        }
        assert [a.key for a in runs["clean"].anchors] == [
            "norm1", "qkv", "proj", "norm2", "fc1", "act", "fc2", "output",
        ]  # fmt: skip
        assert all(p.status is Status.OK for p in runs["clean"].participants)
        assert not runs["clean"].findings
        flagged = [f.anchor for f in runs["eps6"].findings if f.participant == f"{library}-port"]
        assert flagged and flagged[0] == "norm1", library  # first after the first LayerNorm


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "anpred", *args], capture_output=True, text=True, timeout=900
    )


@pytest.mark.parametrize(
    ("flags", "needle"),
    [
        (("--ports", "paddle"), "--ports takes LIBRARY=path/to/file.py:function"),
        (("--ports", "paddle=missing.py:build"), "'missing.py' does not exist"),
        (("--anchor-map", "missing.json"), "--anchor-map 'missing.json' does not exist"),
    ],
)
def test_bad_port_flags_are_one_line(tmp_path: Path, flags: tuple[str, ...], needle: str) -> None:
    source = f"{ROOT / 'tests' / 'interchange' / 'user_modules.py'}:build_cnn"
    proc = _cli("run", source, "--libs", "torch", *flags, "--out", str(tmp_path / "o"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("anpred: error")]
    assert len(errors) == 1 and needle in errors[0], proc.stderr[-2000:]


@pytest.mark.slow
def test_a_port_from_the_command_line(reference: tuple[object, Path, Path], tmp_path: Path) -> None:
    _, port, _ = reference  # the weights of SmallCnn under seed 0, as build_cnn makes it
    source = f"{ROOT / 'tests' / 'interchange' / 'user_modules.py'}:build_cnn"
    proc = _cli(
        "run", source, "--libs", "torch,onnxruntime", "--images", "1", "--no-drill",
        "--ports", f"paddle={port}:clean", "--out", str(tmp_path / "run"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "paddle-port" in proc.stdout
    run = anpred.load(tmp_path / "run")
    record = next(p for p in run.participants if p.participant == "paddle-port")
    assert record.status is Status.OK and record.settings["weights"]["differ"] == []
