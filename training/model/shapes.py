"""The decoder's shapes and what follows from them without torch: parameter count and checkpoint size.

Torch-free so that the charts (a synth-time check of the launcher's timeouts) and the planner can size a model.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

#: Bytes a checkpoint holds per parameter: fp32 weights (FSDP2's sharded master copy) and AdamW's two fp32 moments.
CHECKPOINT_BYTES_PER_PARAM = 12
#: Vocabulary of a named size when the data does not say: the project's byte tokenizer (264) for the small sizes,
#: Llama 3's tokenizer (128,256) for ``llama3-8b``.
DEFAULT_VOCAB = {"tiny": 264, "small": 264, "1b": 264, "llama3-8b": 128256}


@dataclass(frozen=True)
class RopeScaling:
    """Llama 3.1's RoPE frequency scaling (Hugging Face ``rope_type: llama3``)."""

    factor: float
    low_freq_factor: float
    high_freq_factor: float
    original_max_position_embeddings: int


@dataclass(frozen=True)
class ModelArgs:
    """Shape of the decoder; ``vocab_size`` is filled in by :func:`build_model`."""

    dim: int
    n_layers: int
    n_heads: int
    n_kv_heads: int
    ffn_dim: int
    max_seq_len: int = 4096
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    rope_scaling: RopeScaling | None = None
    vocab_size: int = 0

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


#: Named sizes. ``tiny`` is a few hundred thousand parameters for CPU tests; ``llama3-8b`` is Llama 3.1 8B's shape.
MODEL_SIZES: dict[str, ModelArgs] = {
    "tiny": ModelArgs(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, ffn_dim=176, max_seq_len=1024),
    "small": ModelArgs(dim=512, n_layers=8, n_heads=8, n_kv_heads=4, ffn_dim=1408, max_seq_len=2048),
    "1b": ModelArgs(dim=2048, n_layers=16, n_heads=32, n_kv_heads=8, ffn_dim=8192, max_seq_len=4096),
    "llama3-8b": ModelArgs(dim=4096, n_layers=32, n_heads=32, n_kv_heads=8, ffn_dim=14336, max_seq_len=8192),
}


def param_shapes(args: ModelArgs, vocab_size: int | None = None) -> list[tuple[int, ...]]:
    """The shapes of the decoder's parameters (those of :func:`training.model.llama.build_model`, without building
    it): embeddings, per layer attention (GQA) + SwiGLU + two norms, final norm, output."""
    vocab = vocab_size if vocab_size is not None else args.vocab_size
    q, kv, d, f = args.n_heads * args.head_dim, args.n_kv_heads * args.head_dim, args.dim, args.ffn_dim
    layer = [(q, d), (kv, d), (kv, d), (d, q), (f, d), (d, f), (f, d), (d,), (d,)]
    return [(vocab, d), *layer * args.n_layers, (d,), (vocab, d)]


def param_count(args: ModelArgs, vocab_size: int | None = None) -> int:
    """Parameters of the decoder (:func:`param_shapes`)."""
    return sum(math.prod(shape) for shape in param_shapes(args, vocab_size))


def checkpoint_bytes(size: str) -> int:
    """Bytes of one checkpoint of the named model size (weights and optimizer state, all ranks together)."""
    return CHECKPOINT_BYTES_PER_PARAM * param_count(MODEL_SIZES[size], DEFAULT_VOCAB[size])
