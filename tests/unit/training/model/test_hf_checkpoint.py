"""Hugging Face Llama weights in this project's decoder: the same logits as ``transformers``' own Llama."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

import pytest
import torch

from tests.helpers.hf_llama import save_tiny_llama
from training.model.hf_checkpoint import (
    HFCheckpointError,
    hf_state_dict,
    load_hf_weights,
    read_hf_config,
    tokenizer_mismatch,
)
from training.model.llama import Transformer, build_model

LLAMA31_ROPE = {
    "rope_type": "llama3",
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 32,
}


def _ours(path: Path) -> Transformer:
    args = read_hf_config(path)
    model = build_model("unused", args.vocab_size, args=args).eval()
    load_hf_weights(model, path, rank=0)
    return model


@pytest.mark.parametrize(
    ("tied", "rope_scaling", "sharded"),
    [(False, None, False), (True, None, False), (False, LLAMA31_ROPE, True)],
    ids=["untied", "tied-embeddings", "llama3.1-rope-scaling-sharded-files"],
)
def test_logits_match_transformers_llama(tmp_path: Path, tied: bool, rope_scaling: dict | None, sharded: bool) -> None:
    ref = save_tiny_llama(tmp_path, tied=tied, rope_scaling=rope_scaling, sharded=sharded)
    assert sharded == (tmp_path / "model.safetensors.index.json").is_file()
    ours = _ours(tmp_path)
    tokens = torch.randint(0, 300, (2, 96), generator=torch.Generator().manual_seed(1))  # past the 32 of scaling
    with torch.no_grad():
        want = ref(tokens).logits
        got = ours(tokens)
    assert got.shape == want.shape
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)


def test_rope_scaling_changes_the_model(tmp_path: Path) -> None:
    """Guards the test above: without Llama 3.1's scaling the logits of long sequences differ."""
    save_tiny_llama(tmp_path / "a", rope_scaling=LLAMA31_ROPE)
    save_tiny_llama(tmp_path / "b", rope_scaling=None)
    tokens = torch.randint(0, 300, (1, 96), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        scaled, plain = _ours(tmp_path / "a")(tokens), _ours(tmp_path / "b")(tokens)
    assert (scaled - plain).abs().max() > 1e-3


def test_config_is_read_into_model_args(tmp_path: Path) -> None:
    save_tiny_llama(tmp_path, rope_scaling=LLAMA31_ROPE)
    args = read_hf_config(tmp_path)
    assert (args.dim, args.n_layers, args.n_heads, args.n_kv_heads, args.ffn_dim) == (64, 2, 4, 2, 160)
    assert args.vocab_size == 300 and args.rope_theta == 500000.0
    assert args.rope_scaling is not None and args.rope_scaling.factor == 8.0


def test_unsupported_or_broken_checkpoints_fail_clearly(tmp_path: Path) -> None:
    with pytest.raises(HFCheckpointError, match=r"no config\.json"):
        read_hf_config(tmp_path)
    save_tiny_llama(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "rope_scaling": {"rope_type": "yarn", "factor": 2}}))
    with pytest.raises(HFCheckpointError, match="rope_scaling type 'yarn' is not supported"):
        read_hf_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({**cfg, "model_type": "mistral"}))
    with pytest.raises(HFCheckpointError, match="model_type 'mistral' is not supported"):
        read_hf_config(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    small = build_model("unused", 300, args=dataclasses.replace(read_hf_config(tmp_path), ffn_dim=128))
    with pytest.raises(HFCheckpointError, match="shapes do not match the model for"):
        load_hf_weights(small, tmp_path, rank=0)
    (tmp_path / "model.safetensors").unlink()
    with pytest.raises(HFCheckpointError, match="only safetensors are read"):
        hf_state_dict(tmp_path, read_hf_config(tmp_path))


def test_data_made_with_another_tokenizer_is_named(tmp_path: Path) -> None:
    model = tmp_path / "llama"
    model.mkdir()
    assert "bytes tokenizer, not a Hugging Face one" in tokenizer_mismatch({"kind": "bytes"}, model)
    assert tokenizer_mismatch({"kind": "hf", "sha256": "x", "path": "/t.json"}, model) is None  # nothing to compare
    (model / "tokenizer.json").write_text('{"model": "theirs"}')
    sha = hashlib.sha256((model / "tokenizer.json").read_bytes()).hexdigest()
    assert tokenizer_mismatch({"kind": "hf", "sha256": sha, "path": "/data/tokenizer.json"}, model) is None
    other = tokenizer_mismatch({"kind": "hf", "sha256": "0" * 64, "path": "/other/tokenizer.json"}, model)
    assert other is not None and "/other/tokenizer.json, which differs from" in other
