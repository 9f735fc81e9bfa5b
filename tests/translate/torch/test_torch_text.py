"""TfIdfVectorizer torch translator (src/anpred/translate/torch/ops_text.py).

ONNX's backend node tests cover TF mode on integer pools only; these check IDF and TFIDF
weighting, 1-D input and the float64 run against ONNX's reference evaluator.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from anpred.errors import UsageError
from anpred.translate.graph import GraphProgram
from anpred.translate.torch import make_adapter

X = np.array([[2, 5, 6, 3, 5, 7, 2], [8, 3, 5, 6, 2, 5, 6]], dtype=np.int64)


def _tfidf_model(mode: str, shape: list[int]) -> onnx.ModelProto:
    node = helper.make_node(
        "TfIdfVectorizer", ["x"], ["y"], "tfidf", mode=mode, min_gram_length=1,
        max_gram_length=2, max_skip_count=2, ngram_counts=[0, 3],
        ngram_indexes=[0, 1, 2, 3, 4], pool_int64s=[2, 3, 5, 5, 6, 7, 8],
        weights=[0.5, 1.0, 2.0, 0.25, 3.0],
    )  # fmt: skip
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT64, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])


def _run(model: onnx.ModelProto, x: np.ndarray, dtype: str = "float32") -> np.ndarray:
    adapter = make_adapter({"dtype": dtype})
    return adapter.to_numpy(GraphProgram(model, adapter).run({"x": x})["y"])


@pytest.mark.parametrize("mode", ["TF", "IDF", "TFIDF"])
def test_tfidf_vectorizer_modes_match_onnx_reference(mode: str) -> None:
    model = _tfidf_model(mode, list(X.shape))
    (want,) = ReferenceEvaluator(model).run(None, {"x": X})
    got = _run(model, X)
    assert want.any()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, want)  # small integer counts times exact weights


def test_tfidf_vectorizer_one_row_and_float64() -> None:
    model = _tfidf_model("TFIDF", [X.shape[1]])
    (want,) = ReferenceEvaluator(model).run(None, {"x": X[1]})
    got = _run(model, X[1], "float64")
    assert got.shape == want.shape == (5,)
    assert got.dtype == np.float64  # the float64 reference keeps its float64 run
    np.testing.assert_array_equal(got, want.astype(np.float64))


def test_tfidf_vectorizer_string_pool_is_a_usage_error() -> None:
    """A string pool (torch has no string tensors) is refused in one line."""
    node = helper.make_node(
        "TfIdfVectorizer", ["x"], ["y"], "tfidf", mode="TF", min_gram_length=1,
        max_gram_length=1, max_skip_count=0, ngram_counts=[0], ngram_indexes=[0],
        pool_strings=["a"],
    )  # fmt: skip
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.INT64, [3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)])
    adapter = make_adapter()
    with pytest.raises(UsageError, match="string pools"):
        GraphProgram(model, adapter).run({"x": np.array([1, 2, 1], dtype=np.int64)})
