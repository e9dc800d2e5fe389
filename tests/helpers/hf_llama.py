"""A small random ``transformers`` Llama saved in the Hugging Face layout (the reference for our decoder)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

#: Vocabulary of the test Llama: covers the generated corpus' byte tokenizer.
VOCAB = 300


def save_tiny_llama(out: Path, *, tied: bool = False, rope_scaling: dict | None = None, sharded: bool = False) -> Any:
    """Save a seeded random LlamaForCausalLM (2 layers, GQA 4/2 heads) as safetensors under ``out``; return it."""
    import transformers

    cfg = transformers.LlamaConfig(
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=160,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=256,
        rms_norm_eps=1e-5,
        rope_theta=500000.0,
        rope_scaling=rope_scaling,
        tie_word_embeddings=tied,
    )
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval()
    model.save_pretrained(out, max_shard_size="40KB" if sharded else "10GB")
    return model
