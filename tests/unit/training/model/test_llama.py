"""The Llama-style decoder: shapes, causality, GQA, sizes and FLOP accounting."""

from __future__ import annotations

import pytest
import torch

from training.model.llama import MODEL_SIZES, apply_rope, build_model, count_parameters, flops_per_token, rope_tables


def test_tiny_is_a_few_hundred_thousand_parameters() -> None:
    torch.manual_seed(0)
    n = count_parameters(build_model("tiny", 264))
    assert 50_000 < n < 1_000_000


def test_llama3_8b_shape_matches_llama_3_1_8b() -> None:
    a = MODEL_SIZES["llama3-8b"]
    assert (a.dim, a.n_layers, a.n_heads, a.n_kv_heads, a.ffn_dim) == (4096, 32, 32, 8, 14336)
    # 8.03e9 parameters with the 128256-token vocabulary (untied embeddings), computed without allocating it.
    n = flops_per_token(a.__class__(**{**a.__dict__, "vocab_size": 128256}), seq_len=0) / 6
    n += 128256 * 4096  # input embedding (not counted in FLOPs)
    assert 7.9e9 < n < 8.1e9


def test_forward_shape_and_causality() -> None:
    torch.manual_seed(0)
    model = build_model("tiny", 264).eval()
    x = torch.randint(0, 256, (2, 16))
    logits = model(x)
    assert logits.shape == (2, 16, 264)
    y = x.clone()
    y[:, 10:] = (y[:, 10:] + 1) % 256  # change only the future
    torch.testing.assert_close(model(y)[:, :10], logits[:, :10], rtol=0, atol=0)
    assert not torch.equal(model(y)[:, 10:], logits[:, 10:])


def test_same_seed_same_weights_and_gqa_projection_sizes() -> None:
    torch.manual_seed(3)
    a = build_model("tiny", 264)
    torch.manual_seed(3)
    b = build_model("tiny", 264)
    for (na, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.equal(pa, pb), na
    args = a.args
    assert a.layers[0].attention.wk.weight.shape == (args.n_kv_heads * args.head_dim, args.dim)
    assert a.layers[0].attention.wq.weight.shape == (args.n_heads * args.head_dim, args.dim)


def test_rope_preserves_norm_and_position_zero_is_identity() -> None:
    x = torch.randn(1, 5, 2, 8)
    out = apply_rope(x, rope_tables(8, 5, 10000.0))
    torch.testing.assert_close(out.norm(dim=-1), x.norm(dim=-1))
    torch.testing.assert_close(out[:, 0], x[:, 0])


def test_unknown_size_and_too_long_sequence_are_rejected() -> None:
    with pytest.raises(ValueError, match="unknown model size"):
        build_model("huge", 264)
    model = build_model("tiny", 264, max_seq_len=8)
    with pytest.raises(ValueError, match="exceeds max_seq_len"):
        model(torch.zeros(1, 9, dtype=torch.long))


def test_flops_per_token_grows_with_sequence_and_size() -> None:
    tiny = build_model("tiny", 264).args
    assert flops_per_token(tiny, 256) > flops_per_token(tiny, 128) > 0
    n = count_parameters(build_model("tiny", 264)) - 264 * tiny.dim  # without the input embedding
    assert flops_per_token(tiny, 0) == pytest.approx(6 * n)
