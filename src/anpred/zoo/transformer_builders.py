"""Transformer models built from the ``transformers`` package's architecture code.

Three small models, each a configuration object built in code and weights drawn by torch
under the run's seed (no hub download, nothing fetched): ``bert_tiny`` (a BERT encoder:
token ids and an attention mask in, the last hidden state out), ``llama_tiny`` (a Llama
decoder LM: rotary position embeddings, RMSNorm, grouped-query causal attention, SiLU-gated
MLP; token ids in, logits out) and ``wav2vec2_tiny`` (a wav2vec 2.0 speech encoder: its
convolutional feature extractor on a raw waveform, the convolutional position embedding and
the transformer blocks). Their sizes are small so that a run on two cores takes seconds.

They take token ids (and a mask) or a waveform, not an image, so they run as a user's torch
module does (:mod:`anpred.interchange.user_module`): each builder here is a
``file.py:function`` source returning ``(module, example_inputs)`` (this file is imported
by its path in every torch worker: it registers nothing; :mod:`anpred.zoo.transformer_models`
puts the models in the zoo). The module is a thin wrapper that calls the
``transformers`` model and returns its main tensor; it also registers the model's embedding,
every block and the final norm as its own top-level children (the same module objects), so
that the module-tree anchor plan (:mod:`anpred.interchange.module_plan`) anchors the
embedding, each block and the norm at ``stage`` granularity, and each block's attention and
feed-forward parts at ``layer`` granularity.

Attention runs as ``transformers``' ``eager`` implementation (``MatMul``, ``Softmax``, the
mask added): the classic op decomposition the legacy exporter writes at opset 17.
:mod:`anpred.zoo.transformer_export` writes the same models with ONNX's ``Attention`` op
(opset 23) instead.

Importing this module imports neither torch nor ``transformers``; building a model without
``transformers`` installed is a one-line :class:`~anpred.errors.UsageError`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from anpred.errors import UsageError

#: Tokens per example sequence, and the vocabulary of both language models.
SEQUENCE, VOCAB = 16, 1000
#: Samples of the waveform ``wav2vec2_tiny`` takes (its feature extractor's stride is 320:
#: 12 frames).
SAMPLES = 4000
#: Seed of the example inputs (the run's seeded inputs come from the run's own seed).
EXAMPLE_SEED = 0
#: Attention implementation of the zoo's models (``sdpa``: see transformer_export).
EAGER = "eager"


def transformers_package() -> Any:
    """The ``transformers`` package, or a one-line error that says how to install it."""
    try:
        import transformers
    except ImportError:
        raise UsageError(
            "the transformer models of the zoo need the transformers package: "
            "pip install 'anpred[torch]' (or pip install transformers==5.24.0)"
        ) from None
    return transformers


def staged(model: Any, stages: dict[str, Any], output: str) -> Any:
    """Wrap ``model``: ``stages`` become top-level children; forward returns ``output``.

    Args:
        model: The ``transformers`` model (eval mode).
        stages: Name → submodule of ``model`` (a block list as a ``ModuleList``), registered
            before the model itself, so that these names are the submodules' module paths.
        output: The attribute of the model's output returned (``last_hidden_state``, ...).
    """
    import torch

    class Staged(torch.nn.Module):
        """A ``transformers`` model whose stages are its own top-level children."""

        def __init__(self) -> None:
            super().__init__()
            for name, module in stages.items():
                self.add_module(name, module)
            self.model = model

        def forward(self, **inputs: Any) -> Any:
            return getattr(self.model(**inputs), output)

    return Staged().eval()


def _token_inputs(mask: bool) -> dict[str, Any]:
    """Seeded token ids (and an attention mask whose last quarter is padding)."""
    import torch

    generator = torch.Generator().manual_seed(EXAMPLE_SEED)
    inputs = {"input_ids": torch.randint(0, VOCAB, (1, SEQUENCE), generator=generator)}
    if mask:
        attention = torch.ones(1, SEQUENCE, dtype=torch.int64)
        attention[:, -SEQUENCE // 4 :] = 0
        inputs["attention_mask"] = attention
    return inputs


def bert_tiny(attention: str = EAGER) -> tuple[Any, dict[str, Any]]:
    """A BERT encoder: 4 blocks, hidden size 64, 4 heads; ids and mask in, hidden states out.

    Example inputs: 16 token ids and a mask of 12 ones and 4 zeros (padding); a run draws
    its own ids in the example's range and mask values 0/1.
    """
    tf = transformers_package()
    config = tf.BertConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
        intermediate_size=256, max_position_embeddings=64, attn_implementation=attention,
    )  # fmt: skip
    model = tf.BertModel(config, add_pooling_layer=False).eval()
    stages = {"embeddings": model.embeddings, "blocks": model.encoder.layer}
    return staged(model, stages, "last_hidden_state"), _token_inputs(mask=True)


def llama_tiny(attention: str = EAGER) -> tuple[Any, dict[str, Any]]:
    """A Llama decoder LM: 4 blocks, hidden size 64, 4 query / 2 key-value heads (GQA),
    rotary embeddings, RMSNorm, SiLU-gated MLP; token ids in, next-token logits out.

    The causal mask is the model's own (no attention-mask input: one unpadded sequence).
    """
    tf = transformers_package()
    config = tf.LlamaConfig(
        vocab_size=VOCAB, hidden_size=64, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, intermediate_size=172, max_position_embeddings=64,
        rms_norm_eps=1e-6, attn_implementation=attention,
    )  # fmt: skip
    model = tf.LlamaForCausalLM(config).eval()
    stages = {
        "embed_tokens": model.model.embed_tokens,
        "blocks": model.model.layers,
        "norm": model.model.norm,
    }
    return staged(model, stages, "logits"), _token_inputs(mask=False)


def wav2vec2_tiny(attention: str = EAGER) -> tuple[Any, Any]:
    """A wav2vec 2.0 encoder: 7 conv feature layers (32 channels, GroupNorm first), feature
    projection, convolutional position embedding, 3 transformer blocks of size 64.

    Example input: 4000 samples of seeded noise (a run draws its own).
    """
    import torch

    tf = transformers_package()
    config = tf.Wav2Vec2Config(
        hidden_size=64, num_hidden_layers=3, num_attention_heads=4, intermediate_size=128,
        conv_dim=(32,) * 7, conv_stride=(5, 2, 2, 2, 2, 2, 2), conv_kernel=(10, 3, 3, 3, 3, 2, 2),
        num_conv_pos_embeddings=16, num_conv_pos_embedding_groups=4,
        attn_implementation=attention,
    )  # fmt: skip
    model = tf.Wav2Vec2Model(config).eval()
    stages = {
        "features": model.feature_extractor,
        "projection": model.feature_projection,
        "position": model.encoder.pos_conv_embed,
        "blocks": model.encoder.layers,
    }
    generator = torch.Generator().manual_seed(EXAMPLE_SEED)
    wave = torch.randn(1, SAMPLES, generator=generator)
    return staged(model, stages, "last_hidden_state"), {"input_values": wave}


#: The zoo's transformer models by name.
BUILDERS: dict[str, Callable[..., tuple[Any, Any]]] = {
    "bert_tiny": bert_tiny,
    "llama_tiny": llama_tiny,
    "wav2vec2_tiny": wav2vec2_tiny,
}
