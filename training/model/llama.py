"""Llama-style decoder (RMSNorm, RoPE, SwiGLU, grouped-query attention) with named sizes.

Everything here is plain PyTorch so it runs on CPU (fp32, gloo) and on CUDA (bf16 via FSDP2's
mixed-precision policy). Weights are random unless ``model.hf_checkpoint`` names Hugging Face Llama weights
(:mod:`training.model.hf_checkpoint`, which also reads their shape).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from training.model.shapes import MODEL_SIZES, ModelArgs, RopeScaling

__all__ = ["MODEL_SIZES", "ModelArgs", "RopeScaling", "build_model", "flops_per_token"]


class RMSNorm(nn.Module):
    """Root-mean-square layer norm (computed in fp32)."""

    def __init__(self, dim: int, eps: float) -> None:
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xf = x.float()
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return out.type_as(x) * self.weight


def rope_tables(
    head_dim: int,
    seq_len: int,
    theta: float,
    device: torch.device | None = None,
    scaling: RopeScaling | None = None,
) -> torch.Tensor:
    """Cos/sin tables of shape ``(seq_len, head_dim // 2, 2)``."""
    freqs = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float32, device=device) / head_dim))
    if scaling is not None:
        freqs = scale_rope_frequencies(freqs, scaling)
    angles = torch.outer(torch.arange(seq_len, dtype=torch.float32, device=device), freqs)
    return torch.stack([angles.cos(), angles.sin()], dim=-1)


def scale_rope_frequencies(freqs: torch.Tensor, sc: RopeScaling) -> torch.Tensor:
    """Llama 3.1's scaling: low frequencies divided by ``factor``, high ones kept, a smooth blend between."""
    low_wavelen = sc.original_max_position_embeddings / sc.low_freq_factor
    high_wavelen = sc.original_max_position_embeddings / sc.high_freq_factor
    wavelen = 2 * math.pi / freqs
    scaled = torch.where(wavelen > low_wavelen, freqs / sc.factor, freqs)
    smooth = (sc.original_max_position_embeddings / wavelen - sc.low_freq_factor) / (
        sc.high_freq_factor - sc.low_freq_factor
    )
    blended = (1 - smooth) * scaled / sc.factor + smooth * scaled
    medium = (wavelen >= high_wavelen) & (wavelen <= low_wavelen)
    return torch.where(medium, blended, scaled)


def apply_rope(x: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
    """Rotate pairs of ``x`` (batch, seq, heads, head_dim) by the position angles."""
    seq = x.shape[1]
    xf = x.float().reshape(*x.shape[:-1], -1, 2)
    cos = tables[:seq, :, 0].view(1, seq, 1, -1)
    sin = tables[:seq, :, 1].view(1, seq, 1, -1)
    x0, x1 = xf[..., 0], xf[..., 1]
    out = torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1)
    return out.flatten(-2).type_as(x)


class Attention(nn.Module):
    """Causal grouped-query self-attention."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.n_heads, self.n_kv_heads, self.head_dim = args.n_heads, args.n_kv_heads, args.head_dim
        self.wq = nn.Linear(args.dim, args.n_heads * self.head_dim, bias=False)
        self.wk = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wv = nn.Linear(args.dim, args.n_kv_heads * self.head_dim, bias=False)
        self.wo = nn.Linear(args.n_heads * self.head_dim, args.dim, bias=False)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        b, s, _ = x.shape
        q = apply_rope(self.wq(x).view(b, s, self.n_heads, self.head_dim), rope)
        k = apply_rope(self.wk(x).view(b, s, self.n_kv_heads, self.head_dim), rope)
        v = self.wv(x).view(b, s, self.n_kv_heads, self.head_dim)
        rep = self.n_heads // self.n_kv_heads
        k, v = k.repeat_interleave(rep, dim=2), v.repeat_interleave(rep, dim=2)
        out = F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=True)
        return self.wo(out.transpose(1, 2).reshape(b, s, -1))


class FeedForward(nn.Module):
    """SwiGLU MLP."""

    def __init__(self, dim: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False)
        self.w2 = nn.Linear(hidden, dim, bias=False)
        self.w3 = nn.Linear(dim, hidden, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    """Pre-norm attention + MLP block (the unit FSDP2 shards)."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.attention_norm = RMSNorm(args.dim, args.norm_eps)
        self.attention = Attention(args)
        self.ffn_norm = RMSNorm(args.dim, args.norm_eps)
        self.feed_forward = FeedForward(args.dim, args.ffn_dim)

    def forward(self, x: torch.Tensor, rope: torch.Tensor) -> torch.Tensor:
        h = x + self.attention(self.attention_norm(x), rope)
        return h + self.feed_forward(self.ffn_norm(h))


class Transformer(nn.Module):
    """The decoder: embeddings, blocks, final norm, untied output head."""

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        if args.vocab_size <= 0:
            raise ValueError("vocab_size must be positive")
        self.args = args
        self.tok_embeddings = nn.Embedding(args.vocab_size, args.dim)
        self.layers = nn.ModuleList(TransformerBlock(args) for _ in range(args.n_layers))
        self.norm = RMSNorm(args.dim, args.norm_eps)
        self.output = nn.Linear(args.dim, args.vocab_size, bias=False)
        # Not a parameter/buffer in the state dict: recomputed, so checkpoints stay model-only.
        tables = rope_tables(args.head_dim, args.max_seq_len, args.rope_theta, scaling=args.rope_scaling)
        self.register_buffer("rope", tables, persistent=False)
        self.reset_parameters()

    def init_rope(self) -> None:
        """Fill the RoPE tables in place, computed on the CPU as ``__init__`` does (so that they are bitwise the same on
        every device): after ``to_empty`` of a model built on the meta device."""
        a = self.args
        tables = rope_tables(a.head_dim, a.max_seq_len, a.rope_theta, scaling=a.rope_scaling)
        with torch.no_grad():
            self.rope.copy_(tables.to(self.rope.device))

    def reset_parameters(self) -> None:
        """Deterministic init (given the torch seed): normal(0, 0.02), residual outputs scaled by depth."""
        std = 0.02
        for name, p in self.named_parameters():
            if p.dim() == 1:
                nn.init.ones_(p)
            elif name.endswith(("wo.weight", "w2.weight")):
                nn.init.normal_(p, 0.0, std / math.sqrt(2 * self.args.n_layers))
            else:
                nn.init.normal_(p, 0.0, std)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        """Logits of shape (batch, seq, vocab)."""
        if tokens.shape[1] > self.args.max_seq_len:
            raise ValueError(f"sequence length {tokens.shape[1]} exceeds max_seq_len {self.args.max_seq_len}")
        h = self.tok_embeddings(tokens)
        rope = self.rope.to(h.device)
        for layer in self.layers:
            h = layer(h, rope)
        return self.output(self.norm(h))


def build_model(
    size: str, vocab_size: int, *, max_seq_len: int | None = None, args: ModelArgs | None = None
) -> Transformer:
    """A freshly initialised decoder of a named size, or of ``args`` (seed torch first for reproducible weights)."""
    if args is None:
        if size not in MODEL_SIZES:
            raise ValueError(f"unknown model size {size!r}; known: {', '.join(MODEL_SIZES)}")
        args = MODEL_SIZES[size]
    fields = {**args.__dict__, "vocab_size": vocab_size}
    if max_seq_len is not None:
        fields["max_seq_len"] = max_seq_len
    return Transformer(ModelArgs(**fields))


def count_parameters(model: nn.Module) -> int:
    """Number of parameters (of the unsharded model when called before sharding)."""
    return sum(p.numel() for p in model.parameters())


def flops_per_token(args: ModelArgs, seq_len: int, *, n_params: int | None = None) -> float:
    """Training FLOPs per token: 6 x non-embedding params + 12 x layers x dim x seq (attention)."""
    if n_params is None:
        per_layer = (
            args.dim * args.head_dim * (2 * args.n_heads + 2 * args.n_kv_heads)  # q, o, k, v
            + 3 * args.dim * args.ffn_dim
            + 2 * args.dim
        )
        n_params = args.n_layers * per_layer + args.dim + args.dim * args.vocab_size  # + norm + output head
    return 6.0 * n_params + 12.0 * args.n_layers * args.dim * seq_len
