"""Why a backend node test does not pass in a library (the expectation files' reasons).

Categories, tried in this order:

* ``no translator``: anpred has no translator for an op of the test;
* ``out of scope for inference``: the test exercises training behaviour (training-mode
  BatchNormalization/Dropout, optimiser ops) or random outputs, which a run never executes;
* ``upstream difference``: onnxruntime, the reference implementation, fails the test too;
* ``unsupported by the library's kernels``: a documented limit of the library's own
  kernels that no faithful translation can work around (:data:`KERNEL_LIMITS`);
* ``needs a static input`` (fed mode only): the translator needs an input that sizes an
  output or shapes the computation (Resize scales/sizes, Reshape shape, Slice starts,
  Unsqueeze axes, LSTM sequence_lens ...) when the graph is built; an exported model holds
  it as a constant, and the same test passes in static mode (checked, not assumed);
* ``open``: a translator gap not analysed yet; the library's message is kept.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping
from typing import Any

CATEGORIES = (
    "no translator",
    "out of scope for inference",
    "upstream difference",
    "unsupported by the library's kernels",
    "needs a static input",
    "open",
)

#: Name fragments of tests that exercise training behaviour or random outputs (first match
#: wins; only the two BatchNormalization tests contain "_training_mode"; RandomNormal(Like)
#: and RandomUniform(Like) tests are named test_randomnormal*/test_randomuniform*).
OUT_OF_SCOPE: dict[str, str] = {
    "_training_mode": (
        "BatchNormalization training_mode=1 normalises with the batch's own statistics and "
        "outputs updated running statistics; exported inference graphs use training_mode=0 "
        "(the running statistics), whose tests pass"
    ),
    "training": "training-mode behaviour (batch statistics, dropout masks)",
    "_train": "training-mode behaviour",
    "bernoulli": "random output",
    # the random-output ops only: "_random" alone also matches tests whose *data* are random
    # (test_reduce_sum_default_axes_keepdims_random, test_argmax_..._random), not their output
    "_randomnormal": "random output",
    "_randomuniform": "random output",
    "adagrad": "optimiser op",
    "adam": "optimiser op",
    "momentum": "optimiser op",
    "gradient": "training graph",
}

#: (library, test name pattern, fnmatch) -> the library kernel's limit that fails the test.
KERNEL_LIMITS: dict[tuple[str, str], str] = {
    ("jax", "test_constantofshape_float_ones"): (
        "XLA compiles static shapes: under jax.jit a shape fed at run time cannot size an "
        "output (in an exported model the shape is static and folded)"
    ),
    ("jax", "test_nonmaxsuppression_*"): (
        "the output size depends on the input values, which jax.jit cannot compile (XLA "
        "compiles static shapes); the translator runs with jit off (passes eagerly)"
    ),
    ("jax", "test_unique_*"): (
        "the output size depends on the input values, which jax.jit cannot compile (XLA "
        "compiles static shapes); the translator runs with jit off (passes eagerly)"
    ),
    ("paddle", "test_gridsample_bicubic*"): (
        "paddle.nn.functional.grid_sample has bilinear and nearest modes only (no bicubic)"
    ),
}


def reason(
    library: str,
    name: str,
    record: Mapping[str, Any],
    ort: Mapping[str, Any] | None,
    static: Mapping[str, Any] | None = None,
) -> tuple[str, str]:
    """Return (category, reason) for a test that does not pass.

    Args:
        library: The library.
        name: The test.
        record: Its outcome and message.
        ort: onnxruntime's expectation of the test, if known.
        static: The library's static-mode expectation of the test, when ``record`` comes
            from a fed-mode run.
    """
    message = str(record.get("message", ""))
    if record["outcome"] == "missing":
        return "no translator", message
    lowered = name.lower()
    for fragment, why in OUT_OF_SCOPE.items():
        if fragment in lowered:
            return "out of scope for inference", why
    if library != "onnxruntime" and ort is not None and ort.get("outcome") != "pass":
        return "upstream difference", f"onnxruntime: {ort.get('outcome')}; here: {message}"
    for (lib, pattern), why in KERNEL_LIMITS.items():
        if lib == library and fnmatch.fnmatchcase(name, pattern):
            return "unsupported by the library's kernels", why
    if (
        static is not None
        and static.get("outcome") == "pass"
        and record["outcome"] == "error"
        and "static" in message
    ):
        return "needs a static input", f"passes in static mode; fed: {message}"
    if library == "onnxruntime":
        return "upstream difference", message
    return "open", message


def annotate(
    library: str,
    records: Mapping[str, Mapping[str, Any]],
    onnxruntime: Mapping[str, Mapping[str, Any]],
    static: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, dict[str, Any]]:
    """Expectation entries: outcome, vision flag, and category/reason when not passing.

    ``static`` is the library's static-mode expectations when ``records`` are fed-mode.
    """
    entries = {}
    for name, record in records.items():
        entry: dict[str, Any] = {"outcome": record["outcome"], "vision": record["vision"]}
        if record["outcome"] != "pass":
            entry["category"], entry["reason"] = reason(
                library, name, record, onnxruntime.get(name),
                None if static is None else static.get(name),
            )  # fmt: skip
        entries[name] = entry
    return entries
