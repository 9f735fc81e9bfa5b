"""Transform records, the registry, and how a worker combines a participant's transforms."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anpred.backends.base import Capture, ModelJob, NodeHooks, Runner
from anpred.errors import UsageError
from anpred.interchange.export import AnchoredExport
from anpred.interchange.transform import (
    TRANSFORMS_KEY,
    Transform,
    Transforms,
    check_records,
    register_transform,
    transform_from_record,
)


@register_transform
class Tag(Transform):
    """Appends its tag: to node values (hooks), to the capture (inference), to the folder."""

    kind = "test-tag"

    def __init__(self, tag: str) -> None:
        self.tag = tag

    def params(self) -> dict[str, Any]:
        return {"tag": self.tag}

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Tag:
        return cls(params["tag"])

    def model(self, job: ModelJob) -> ModelJob:
        export = job.export
        moved = AnchoredExport(export.folder / self.tag, export.input_name, (1,), 17, ())
        return ModelJob(moved, job.zoo_model)

    def node_hooks(self, library: str) -> NodeHooks:
        return NodeHooks(
            pre=lambda _call, values: [*values, f"pre:{self.tag}"],
            post=lambda _call, values: [*values, f"post:{self.tag}:{library}"],
        )

    def wrap_infer(self, infer: Any) -> Any:
        def tagged(feed: np.ndarray) -> Capture:
            capture = infer(feed)
            capture.layouts.setdefault("order", "")
            capture.layouts["order"] += self.tag
            return capture

        return tagged


def _job() -> ModelJob:
    return ModelJob(AnchoredExport(Path("/export"), "x", (1,), 17, ()), None)


def test_a_record_names_kind_and_module_and_rebuilds_the_transform() -> None:
    record = Tag("a").record()
    assert record == {"kind": "test-tag", "module": __name__, "tag": "a"}
    rebuilt = transform_from_record(record)
    assert isinstance(rebuilt, Tag) and rebuilt.tag == "a"


def test_transforms_apply_in_order() -> None:
    transforms = Transforms.of(
        {TRANSFORMS_KEY: {"jax": [Tag("a").record(), Tag("b").record()]}}, "jax"
    )
    assert transforms.records() == [Tag("a").record(), Tag("b").record()]
    assert transforms.model(_job()).export.folder == Path("/export/a/b")
    hooks = transforms.node_hooks("jax")
    assert hooks is not None and hooks.pre is not None and hooks.post is not None
    assert hooks.pre(None, [1]) == [1, "pre:a", "pre:b"]
    assert hooks.post(None, [1]) == [1, "post:a:jax", "post:b:jax"]
    infer = transforms.wrap_infer(lambda _feed: Capture({}))
    assert infer(np.zeros(1)).layouts["order"] == "ab"  # the first transform is innermost
    # a participant without transforms runs unchanged
    clean = Transforms.of({TRANSFORMS_KEY: {"jax": [Tag("a").record()]}}, "onnxruntime")
    assert clean.items == () and clean.node_hooks("onnxruntime") is None
    assert clean.model(_job()) == _job()


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ({"kind": "nowhere"}, "unknown transform kind 'nowhere'"),
        ({"kind": "x", "module": "no_such_module_here"}, "cannot import its module"),
        ({"module": __name__}, "needs a 'kind'"),
    ],
)
def test_bad_records_are_one_line_errors(record: dict[str, Any], message: str) -> None:
    with pytest.raises(UsageError, match=message):
        check_records({"jax": [record]})


def test_a_kind_is_registered_once() -> None:
    class Other(Tag):
        kind = "test-tag"

    with pytest.raises(ValueError, match="duplicate transform kind 'test-tag'"):
        register_transform(Other)


class _WholeGraphRunner(Runner):
    """A runner that does not execute the graph node by node."""

    library = "whole"

    def activate_impl(self, job: ModelJob) -> None:
        pass

    def infer_impl(self, feed: np.ndarray) -> Capture:
        return Capture({})

    def infer_plain_impl(self, feed: np.ndarray) -> np.ndarray:
        return feed

    def isolate_impl(self, feed: np.ndarray, anchors: Mapping[str, np.ndarray]) -> Capture:
        return Capture({})

    def version(self) -> str:
        return "0"


def test_a_runner_without_node_execution_refuses_hooks() -> None:
    with pytest.raises(UsageError, match="cannot apply per-node hooks"):
        _WholeGraphRunner({}, NodeHooks(post=lambda _c, v: v))
    assert _WholeGraphRunner({}).hooks is None
