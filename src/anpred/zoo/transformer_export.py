"""The zoo's transformers with ONNX's fused transformer ops (``Attention``, opset 23).

``anpred run bert_tiny`` exports with the legacy exporter at opset 17, attention as
``transformers``' eager code writes it (``MatMul``, ``Softmax``, the mask added). This module
writes the same model, built with ``attn_implementation="sdpa"``, through torch's dynamo
exporter at opset 23, every anchor of the zoo plan as a graph output ``anchor.<key>``, the
final output ``anchor.output`` first. Run it as an ONNX file: those outputs are its anchors
(:func:`anpred.pipeline.user_onnx.declared_anchors`)::

    python -m anpred.zoo.transformer_export llama_tiny llama_tiny_op23.onnx
    anpred run llama_tiny_op23.onnx --libs all --input-range 0,99

What torch 2.14.1's exporter emits (measured with transformers 5.24.0, onnxscript 0.7.2):

* ``Attention`` (opset 23) for every ``aten.scaled_dot_product_attention`` without dropout:
  every block of the three models (4, 4 and 3);
* ``RMSNormalization`` (opset 23) only where ``aten.rms_norm`` is called, or where the
  onnxscript rewriter (``optimize=True``, the default) fuses the written-out pattern:
  ``transformers``' ``LlamaRMSNorm`` (``pow``, ``mean``, ``rsqrt``) becomes 9
  ``RMSNormalization`` with ``optimize=True`` and stays ``Pow``/``ReduceMean``/``Sqrt``/
  ``Reciprocal`` without;
* ``RotaryEmbedding`` (opset 23) never: only ``torch.onnx.ops.rotary_embedding`` emits it;
  ``transformers``' ``rotate_half`` stays ``Slice``/``Neg``/``Concat``/``Mul``;
* also ``Gelu`` (opset 20; BERT, wav2vec2) and ``GroupNormalization`` (opset 21; wav2vec2's
  first conv layer), which the legacy exporter writes as ``Erf`` arithmetic and
  ``InstanceNormalization``.
"""

from __future__ import annotations

import argparse
import sys
import warnings
from collections import Counter
from pathlib import Path

from anpred.interchange.anchored import anchored_module
from anpred.interchange.module_plan import module_plan
from anpred.zoo import transformer_builders

#: Opset of the fused export (``Attention``, ``RMSNormalization``, ``RotaryEmbedding``: 23).
FUSED_OPSET = 23
#: Prefix of the anchor outputs' names.
ANCHOR_PREFIX = "anchor."


def export_fused(
    name: str, path: Path, opset: int = FUSED_OPSET, optimize: bool = True, seed: int = 0
) -> tuple[list[str], Counter[str]]:
    """Write zoo transformer ``name`` with fused ops and its anchors as outputs to ``path``.

    Args:
        name: ``bert_tiny``, ``llama_tiny`` or ``wav2vec2_tiny``.
        path: The ONNX file written.
        opset: ONNX opset.
        optimize: Run the onnxscript optimizer and rewriter (fuses ``RMSNormalization``).
        seed: Seed torch has when the weights are drawn (as ``anpred run --seed``).

    Returns:
        The anchor outputs' names (final output first) and the graph's op counts.
    """
    import onnx
    import torch

    torch.manual_seed(seed)
    module, example = transformer_builders.BUILDERS[name]("sdpa")
    names = list(example)
    inputs = [example[n] for n in names]
    anchors = module_plan(module, "stage", inputs, names)
    wrapper = anchored_module(module, anchors, names).eval()
    with torch.no_grad():
        wrapper(*inputs)
    outputs = [f"{ANCHOR_PREFIX}{key}" for key in wrapper.keys]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        program = torch.onnx.export(
            wrapper, tuple(inputs), dynamo=True, opset_version=opset, optimize=optimize,
            input_names=names, output_names=outputs, verbose=False,
        )  # fmt: skip
    model = program.model_proto
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return outputs, Counter(node.op_type for node in model.graph.node)


def main(argv: list[str] | None = None) -> int:
    """Export one zoo transformer with fused ops; print its anchors and op counts."""
    parser = argparse.ArgumentParser(prog="python -m anpred.zoo.transformer_export")
    parser.add_argument("model", choices=sorted(transformer_builders.BUILDERS))
    parser.add_argument("out", type=Path)
    parser.add_argument("--opset", type=int, default=FUSED_OPSET)
    parser.add_argument("--no-optimize", action="store_true", help="no onnxscript rewriter")
    args = parser.parse_args(argv)
    outputs, ops = export_fused(args.model, args.out, args.opset, not args.no_optimize)
    print(
        f"{args.out}: {sum(ops.values())} nodes; "
        + ", ".join(f"{o}×{n}" for o, n in sorted(ops.items()))
    )
    print("anchors: " + " ".join(outputs[1:]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
