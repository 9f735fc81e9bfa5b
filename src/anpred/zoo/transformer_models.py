"""The transformer models of the zoo (:mod:`anpred.zoo.transformer_builders` builds them).

Each runs from its module source, ``/abs/path/transformer_builders.py:<name>``, as a user's
torch module does: its example inputs (token ids and a mask, or a waveform) and the anchor
plan of its module tree come with it. Importing this module imports no DL library.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from anpred.interchange.module_plan import module_plan
from anpred.zoo import transformer_builders
from anpred.zoo.registry import register_model
from anpred.zoo.spec import Anchor, ModelSpec

#: Name, family and one line for ``anpred models``, of each transformer model.
MODELS = (
    ("bert_tiny", "language", "BERT encoder, 4 blocks of 64, token ids + mask"),
    ("llama_tiny", "language", "Llama decoder LM, 4 blocks of 64, RoPE, RMSNorm, GQA"),
    ("wav2vec2_tiny", "speech", "wav2vec 2.0 encoder, conv features + 3 blocks of 64"),
)


def zoo_source(name: str) -> str:
    """The module source (``/abs/path/transformer_builders.py:name``) of a transformer."""
    return f"{Path(transformer_builders.__file__).resolve()}:{name}"


def tree_plan(
    builder: Callable[..., tuple[Any, Any]], model: Any, granularity: str
) -> list[Anchor]:
    """The anchor plan a run gives the module ``builder`` makes: its module tree's
    (:func:`~anpred.interchange.module_plan.module_plan`, on the builder's example inputs).
    """
    _, example = builder()
    if isinstance(example, dict):
        return module_plan(model, granularity, list(example.values()), list(example))
    return module_plan(model, granularity, [example])


for _name, _family, _notes in MODELS:
    _builder = transformer_builders.BUILDERS[_name]
    register_model(
        ModelSpec(
            name=_name,
            family=_family,
            source="transformers",
            input_size=0,
            preprocessing="none",
            build=lambda builder=_builder: builder()[0],
            plan=partial(tree_plan, _builder),
            notes=_notes,
            module_source=zoo_source(_name),
        )
    )
