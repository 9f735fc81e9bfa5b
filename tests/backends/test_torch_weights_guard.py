"""The native torch runner refuses a run whose export was made with other weights."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("torch")

from anpred.backends.base import ModelJob  # noqa: E402
from anpred.backends.registry import runner_class  # noqa: E402
from anpred.errors import UsageError  # noqa: E402
from anpred.interchange.export import AnchoredExport  # noqa: E402


def _job(tmp_path: Path, weights_id: str | None) -> ModelJob:
    export = AnchoredExport(tmp_path, "images", (1, 3, 64, 64), 17, (), weights_id)
    return ModelJob(export, zoo_model="resnet50")


def test_a_changed_weights_recipe_is_refused(tmp_path: Path) -> None:
    """A resumed run whose export predates a change of the seeded-weights recipe would
    mix participants computed with two sets of weights; torch says so instead."""
    with pytest.raises(UsageError, match="recipe changed"):
        runner_class("torch")({}).activate(_job(tmp_path, "seed0-old"))


def test_matching_or_unrecorded_weights_are_accepted(tmp_path: Path) -> None:
    for weights_id in ("seed0", None):  # None: run directories from before the record
        runner_class("torch")({}).activate(_job(tmp_path, weights_id))


def test_the_export_round_trips_its_weights_id(tmp_path: Path) -> None:
    export = _job(tmp_path, "seed0-ls1").export
    assert AnchoredExport.from_dict(export.to_dict()).weights_id == "seed0-ls1"
    legacy = {k: v for k, v in export.to_dict().items() if k != "weights_id"}
    assert AnchoredExport.from_dict(legacy).weights_id is None
