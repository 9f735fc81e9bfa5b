"""Reproducers (``anpred repro``) measured: injected single-operator faults, and real findings.

``faults``: for each injected single-operator fault of :data:`FAULTS` (two models, four
libraries, six fault kinds), ``anpred inject`` runs the model with the fault, then the
reducer (:mod:`anpred.repro`) writes the reproducer of the faulty participant's finding and,
as the baseline, the stage cut alone (``ReproOptions.baseline``). Printed: how often each
contains the faulty operator, is minimal (no operator removable), and reproduces standalone
(its script, run by the stock library in its own environment, shows the error), with the
sizes. Faults applied by anpred's per-node hooks (jax: the translators compute the fault)
have no graph form, so their scripts run the clean library: their standalone column says
so (``n/a``), and they count for containment and minimality only.

``summarize RUN_DIR [...]``: the reproducers of real runs (``RUN_DIR/repro/index.json``):
status, operators in the reproducer / in the model, folder size, bisection.

Usage::

    nice -n 10 .venv/bin/python benchmarks/bench_repro.py faults --out /tmp/bench_repro
    .venv/bin/python benchmarks/bench_repro.py summarize /tmp/alex /tmp/alex_mnn
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

#: (model, faulted library, node, fault kind, severity or None)
FAULTS: list[tuple[str, str, str, str, float | None]] = [
    ("tiny", "onnxruntime", "/block2/act/Sigmoid", "bf16", None),
    ("tiny", "openvino", "/block2/act/Sigmoid", "bf16", None),
    ("tiny", "onnxruntime", "/block2/conv/Conv", "bf16", None),
    ("tiny", "openvino", "/block1/conv/Conv", "fp16", 10.0),
    ("tiny", "onnxruntime", "/head/fc/Gemm", "bf16", None),
    ("tiny", "onnxruntime", "/block1/act/Relu", "mantissa", 6),
    ("tiny", "jax", "/block2/conv/Conv", "lowp_accum", 10.0),
    ("tiny", "jax", "/block2/act/Sigmoid", "approx_act", None),
    ("tiny", "mnn", "/block2/act/Sigmoid", "bf16", None),
    ("res", "onnxruntime", "/layer1/conv2/Conv", "bf16", None),
    ("res", "openvino", "/layer1/conv2/Conv", "bf16", None),
    ("res", "onnxruntime", "/layer1/Add", "bf16", None),
    ("res", "openvino", "/layer2/conv1/Conv", "fp16", 10.0),
    ("res", "onnxruntime", "/layer2/act1/Relu", "mantissa", 7),
    ("res", "openvino", "/layer2/Add", "mantissa", 7),
    ("res", "onnxruntime", "/stem/conv/Conv", "lowp_accum", 10.0),
    ("res", "jax", "/layer1/conv1/Conv", "bf16", None),
    ("res", "jax", "/layer2/conv2/Conv", "bf16", None),
    ("res", "onnxruntime", "/head/fc/Gemm", "fp16", 10.0),
    ("res", "openvino", "/layer1/act1/Relu", "bf16", None),
    ("res", "onnxruntime", "/layer2/conv2/Conv", "mantissa", 8),
    ("res", "mnn", "/layer1/conv2/Conv", "bf16", None),
]
#: Libraries whose faults are rewritten graphs (a standalone script can carry them).
GRAPH_FAULTS = {"onnxruntime", "openvino", "mnn"}


def _init(
    rng: np.random.Generator, name: str, shape: tuple[int, ...], scale: float
) -> onnx.TensorProto:
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def _conv(name: str, x: str, w: str, b: str, out: str) -> onnx.NodeProto:
    return helper.make_node("Conv", [x, w, b], [out], name=name, pads=[1, 1, 1, 1])


def tiny_model(path: Path) -> Path:
    """The test suite's tiny CNN: Conv/Relu, Conv(stride 2)/Sigmoid, pool/Gemm."""
    rng = np.random.default_rng(0)
    inits = [_init(rng, "w1", (8, 3, 3, 3), 0.3), _init(rng, "b1", (8,), 0.3),
             _init(rng, "w2", (16, 8, 3, 3), 0.2), _init(rng, "b2", (16,), 0.3),
             _init(rng, "w3", (10, 16), 0.3), _init(rng, "b3", (10,), 0.3)]  # fmt: skip
    nodes = [
        _conv("/block1/conv/Conv", "images", "w1", "b1", "c1"),
        helper.make_node("Relu", ["c1"], ["r1"], name="/block1/act/Relu"),
        helper.make_node(
            "Conv",
            ["r1", "w2", "b2"],
            ["c2"],
            name="/block2/conv/Conv",
            pads=[1, 1, 1, 1],
            strides=[2, 2],
        ),  # fmt: skip
        helper.make_node("Sigmoid", ["c2"], ["s2"], name="/block2/act/Sigmoid"),
        helper.make_node("GlobalAveragePool", ["s2"], ["p3"], name="/head/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["p3"], ["f3"], name="/head/Flatten"),
        helper.make_node("Gemm", ["f3", "w3", "b3"], ["logits"], name="/head/fc/Gemm", transB=1),
    ]
    return _save(nodes, inits, (1, 3, 32, 32), path)


def res_model(path: Path) -> Path:
    """Two residual blocks (Conv/Relu/Conv/Add/Relu) after a stem, then pool/Gemm."""
    rng = np.random.default_rng(1)
    inits = [_init(rng, "ws", (16, 3, 3, 3), 0.3), _init(rng, "bs", (16,), 0.1)]
    nodes = [_conv("/stem/conv/Conv", "images", "ws", "bs", "s0"),
             helper.make_node("Relu", ["s0"], ["x0"], name="/stem/act/Relu")]  # fmt: skip
    x = "x0"
    for layer in (1, 2):
        p = f"/layer{layer}"
        for i in (1, 2):
            inits += [_init(rng, f"w{layer}{i}", (16, 16, 3, 3), 0.12),
                      _init(rng, f"b{layer}{i}", (16,), 0.1)]  # fmt: skip
        nodes += [
            _conv(f"{p}/conv1/Conv", x, f"w{layer}1", f"b{layer}1", f"l{layer}c1"),
            helper.make_node("Relu", [f"l{layer}c1"], [f"l{layer}r1"], name=f"{p}/act1/Relu"),
            _conv(f"{p}/conv2/Conv", f"l{layer}r1", f"w{layer}2", f"b{layer}2", f"l{layer}c2"),
            helper.make_node("Add", [f"l{layer}c2", x], [f"l{layer}a"], name=f"{p}/Add"),
            helper.make_node("Relu", [f"l{layer}a"], [f"x{layer}"], name=f"{p}/act2/Relu"),
        ]
        x = f"x{layer}"
    inits += [_init(rng, "wf", (10, 16), 0.3), _init(rng, "bf", (10,), 0.1)]
    nodes += [
        helper.make_node("GlobalAveragePool", [x], ["p"], name="/head/pool/GlobalAveragePool"),
        helper.make_node("Flatten", ["p"], ["f"], name="/head/Flatten"),
        helper.make_node("Gemm", ["f", "wf", "bf"], ["logits"], name="/head/fc/Gemm", transB=1),
    ]
    return _save(nodes, inits, (1, 3, 24, 24), path)


def _save(nodes: list, inits: list, shape: tuple[int, ...], path: Path) -> Path:
    graph = helper.make_graph(
        nodes, path.stem, [helper.make_tensor_value_info("images", TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])], initializer=inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path


def _libs(lib: str) -> str:
    return "torch,onnxruntime,openvino," + ("mnn" if lib == "mnn" else "jax")


def one_fault(out: Path, index: int, fault: tuple, models: dict[str, Path]) -> dict:
    """Inject one fault, reproduce its finding with the stage baseline; one result row."""
    from anpred.errors import AnpredError
    from anpred.repro import ReproOptions, make_reproducers
    from anpred.store import RunStore

    model, lib, node, kind, severity = fault
    run = out / f"f{index:02d}"
    row: dict = {"model": model, "lib": lib, "node": node, "fault": kind, "severity": severity}
    started = time.perf_counter()
    if not (run / "summary.json").exists():
        args = [sys.executable, "-m", "anpred", "inject", str(models[model]), "--lib", lib,
                "--node", node, "--fault", kind, "--libs", _libs(lib), "--images", "2",
                "--out", str(run)]  # fmt: skip
        if severity is not None:
            args += ["--severity", str(severity)]
        done = subprocess.run(args, capture_output=True, text=True, timeout=1800,
                              env={**os.environ, "JAX_PLATFORMS": "cpu"})  # fmt: skip
        if done.returncode not in (0, 1):
            return {**row, "error": done.stderr.strip().splitlines()[-1:]}
    truth = RunStore(run).read_ground_truth()["injected"]
    finding = f"{truth['participant']}@{truth['stage']}"
    row["finding"] = finding
    try:
        [record] = make_reproducers(run, ReproOptions(finding=finding, baseline=True))
    except AnpredError as err:
        return {**row, "error": str(err), "seconds": round(time.perf_counter() - started, 1)}
    base = record.stage_baseline
    return {
        **row,
        "named": record.node,
        "status": record.status,
        "reason": record.reason,
        "contains": node in record.case_nodes,
        "minimal": record.minimal,
        "ops": record.ops_in_case,
        "stage_ops": record.ops_in_stage,
        "model_ops": record.ops_in_model,
        "bytes": record.folder_bytes,
        "ratio": record.case_ratio,
        "rounds": record.rounds,
        "base_contains": node in base.get("case_nodes", []),
        "base_minimal": record.ops_in_stage == record.ops_in_case and record.minimal,
        "base_status": base.get("status"),
        "base_bytes": base.get("folder_bytes"),
        "seconds": round(time.perf_counter() - started, 1),
    }


def _verified(rows: list[dict], key: str) -> str:
    return f"{sum(r[key] == 'verified' for r in rows)}/{len(rows)}"


def _pct(rows: list[dict], key: str) -> str:
    hits = sum(bool(r.get(key)) for r in rows)
    return f"{hits}/{len(rows)}"


def report(rows: list[dict]) -> None:
    """Print the per-fault table and the totals."""
    print(f"{'#':>2} {'model':5} {'lib':12} {'fault':11} {'node':22} {'status':15} "
          f"{'has':>4} {'min':>4} {'ops':>7} {'base':15} {'s':>5}")  # fmt: skip
    for i, r in enumerate(rows):
        if "error" in r:
            print(f"{i:>2} {r['model']:5} {r['lib']:12} {r['fault']:11} {r['node'][:22]:22} "
                  f"error: {str(r['error'])[:60]}")  # fmt: skip
            continue
        print(f"{i:>2} {r['model']:5} {r['lib']:12} {r['fault']:11} {r['node'][:22]:22} "
              f"{r['status']:15} {str(r['contains'])[0]:>4} {str(r['minimal'])[0]:>4} "
              f"{r['ops']}/{r['stage_ops']}/{r['model_ops']:<3} {str(r['base_status']):15} "
              f"{r['seconds']:>5}")  # fmt: skip
    done = [r for r in rows if "error" not in r]
    graph = [r for r in done if r["lib"] in GRAPH_FAULTS]
    print(f"\nfaults: {len(rows)} ({len(done)} reproduced by the reducer's pipeline, "
          f"{len(graph)} with graph faults a standalone script can carry)")  # fmt: skip
    print(f"reproducer: contains the faulty operator {_pct(done, 'contains')}, minimal "
          f"{_pct(done, 'minimal')}, standalone verified "
          f"{_verified(graph, 'status')} (graph faults)")  # fmt: skip
    print(f"stage cut:  contains the faulty operator {_pct(done, 'base_contains')}, minimal "
          f"{_pct(done, 'base_minimal')}, standalone verified "
          f"{_verified(graph, 'base_status')} (graph faults)")  # fmt: skip
    if done:
        ops = [r["ops"] for r in done]
        stage = [r["stage_ops"] for r in done]
        share = np.mean([r["ops"] / r["model_ops"] for r in done])
        print(f"operators: reproducer mean {np.mean(ops):.2f}, stage cut mean "
              f"{np.mean(stage):.2f}; reproducer / model: {share:.3f}")  # fmt: skip
        ratios = [r["ratio"] for r in done if r["ratio"]]
        print(f"error of the reduced case / drill-down's: {min(ratios):.3f}..{max(ratios):.3f}")
        mine = int(np.median([r["bytes"] for r in done]))
        theirs = int(np.median([r["base_bytes"] or 0 for r in done]))
        print(f"folder bytes: reproducer median {mine}, stage cut median {theirs}")


def cmd_faults(args: argparse.Namespace) -> None:
    """Run every fault of :data:`FAULTS` (resumable: ``OUT/results.json``), then report."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    models = {"tiny": tiny_model(out / "tiny.onnx"), "res": res_model(out / "res.onnx")}
    rows_path = out / "results.json"
    rows = json.loads(rows_path.read_text()) if rows_path.exists() else []
    done = {(r["model"], r["lib"], r["node"], r["fault"]) for r in rows}
    for index, fault in enumerate(FAULTS[: args.limit]):
        if tuple(fault[:4]) in done:
            continue
        row = one_fault(out, index, fault, models)
        rows.append(row)
        rows_path.write_text(json.dumps(rows, indent=1))
        print(f"[{index + 1}/{len(FAULTS)}] {fault[1]} {fault[2]} {fault[3]}: "
              f"{row.get('status', row.get('error'))}", flush=True)  # fmt: skip
    report(rows)


def cmd_summarize(args: argparse.Namespace) -> None:
    """Print the reproducers of real runs."""
    from anpred.repro import load_reproducers

    print(f"{'finding':34} {'status':15} {'op':6} {'ops':>7} {'ratio':>6} {'MB':>5} "
          f"{'error':>9} {'floor':>9}  bisect")  # fmt: skip
    for run in args.runs:
        for r in load_reproducers(Path(run) / "repro"):
            cause = r.bisect.get("cause") if r.bisect else None
            said = (", ".join(f"{k}={v['to']!r}" for k, v in cause.items()) if cause
                    else (r.bisect.get("reason", "-") if r.bisect else "-"))  # fmt: skip
            error = r.script.get("error", r.case_error) or float("nan")
            print(f"{r.finding[:34]:34} {r.status:15} {r.op_type[:6]:6} "
                  f"{r.ops_in_case}/{r.ops_in_model:<4} {r.reduction_ratio or 0:6.3f} "
                  f"{r.folder_bytes / 1e6:5.2f} {error:9.3g} {r.floor.get('floor', 0):9.3g}  "
                  f"{said}")  # fmt: skip


def main() -> None:
    """Parse the command line and run the subcommand."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    faults = sub.add_parser("faults")
    faults.add_argument("--out", default="/tmp/bench_repro")
    faults.add_argument("--limit", type=int, default=None)
    faults.set_defaults(run=cmd_faults)
    summarize = sub.add_parser("summarize")
    summarize.add_argument("runs", nargs="+")
    summarize.set_defaults(run=cmd_summarize)
    args = parser.parse_args()
    args.run(args)


if __name__ == "__main__":
    main()
