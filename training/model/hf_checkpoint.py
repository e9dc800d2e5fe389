"""Hugging Face Llama weights (``config.json`` + ``*.safetensors``) as this project's model.

``model.hf_checkpoint`` names a local directory in the layout of a Hugging Face model repository, for example
``meta-llama/Llama-3.1-8B`` downloaded to the shared file system. Its ``config.json`` gives the model's shape
(:func:`read_hf_config`), and its weights start a run that has no committed checkpoint yet
(:func:`load_hf_weights`). Only ``safetensors`` is needed, not ``transformers``. Tokenize the data with the
same model's tokenizer (``python -m training.data.prepare --tokenizer DIR``).

Hugging Face stores ``q_proj``/``k_proj`` rows in the "rotate half" order of its RoPE; this model rotates
interleaved pairs (Meta's layout), so those rows are permuted back on load.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import nn

from training.common.files import sha256_file
from training.data.dataset import HF_TOKENIZER_FILE
from training.model.llama import ModelArgs, RopeScaling

CONFIG_FILE = "config.json"
INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


class HFCheckpointError(ValueError):
    """The Hugging Face checkpoint is missing, of an unsupported kind, or does not match the model."""


def _config(path: Path) -> dict[str, Any]:
    cfg_file = path / CONFIG_FILE
    if not cfg_file.is_file():
        raise HFCheckpointError(f"model.hf_checkpoint={str(path)!r}: no {CONFIG_FILE} there")
    return json.loads(cfg_file.read_text())


def read_hf_config(path: str | Path) -> ModelArgs:
    """The model shape of a Llama checkpoint's ``config.json``; anything this decoder cannot express is an error."""
    path = Path(path)
    cfg = _config(path)
    where = f"{path / CONFIG_FILE}"
    if cfg.get("model_type") != "llama":
        raise HFCheckpointError(f"{where}: model_type {cfg.get('model_type')!r} is not supported (only 'llama')")
    for flag in ("attention_bias", "mlp_bias"):
        if cfg.get(flag):
            raise HFCheckpointError(f"{where}: {flag}=true is not supported")
    if cfg.get("hidden_act", "silu") != "silu":
        raise HFCheckpointError(f"{where}: hidden_act {cfg['hidden_act']!r} is not supported (only 'silu')")
    dim, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    rope = cfg.get("rope_parameters") or {}  # transformers 5 keeps theta and scaling here
    if cfg.get("head_dim") not in (None, dim // heads):
        raise HFCheckpointError(f"{where}: head_dim {cfg['head_dim']} != hidden_size / num_attention_heads")
    return ModelArgs(
        dim=dim,
        n_layers=int(cfg["num_hidden_layers"]),
        n_heads=heads,
        n_kv_heads=int(cfg.get("num_key_value_heads") or heads),
        ffn_dim=int(cfg["intermediate_size"]),
        max_seq_len=int(cfg.get("max_position_embeddings", 4096)),
        norm_eps=float(cfg.get("rms_norm_eps", 1e-5)),
        rope_theta=float(cfg.get("rope_theta") or rope.get("rope_theta", 10000.0)),
        rope_scaling=_rope_scaling(cfg.get("rope_scaling") or rope, where),
        vocab_size=int(cfg["vocab_size"]),
    )


def _rope_scaling(rs: dict[str, Any] | None, where: str) -> RopeScaling | None:
    if not rs:
        return None
    kind = rs.get("rope_type", rs.get("type"))
    if kind == "default":
        return None
    if kind != "llama3":
        raise HFCheckpointError(f"{where}: rope_scaling type {kind!r} is not supported (only 'llama3')")
    return RopeScaling(
        factor=float(rs["factor"]),
        low_freq_factor=float(rs["low_freq_factor"]),
        high_freq_factor=float(rs["high_freq_factor"]),
        original_max_position_embeddings=int(rs["original_max_position_embeddings"]),
    )


def tokenizer_mismatch(data_tokenizer: dict[str, Any], path: str | Path) -> str | None:
    """Why data tokenized as ``data_tokenizer`` (``index.json``'s ``tokenizer``) does not suit the model at ``path``.

    None when the data was made with this model's ``tokenizer.json`` (same sha256), or when the model directory
    has no ``tokenizer.json`` to compare with.
    """
    if data_tokenizer.get("kind") != "hf":
        return (
            f"the data was tokenized with {data_tokenizer.get('kind', 'an unknown')} tokenizer, not a Hugging Face one"
        )
    tok = Path(path) / HF_TOKENIZER_FILE
    if not tok.is_file():
        return None
    if data_tokenizer.get("sha256") != sha256_file(tok):
        return f"the data was tokenized with {data_tokenizer.get('path')}, which differs from {tok}"
    return None


def _read_tensors(path: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    if (path / INDEX_FILE).is_file():
        weight_map = json.loads((path / INDEX_FILE).read_text())["weight_map"]
        files = sorted(set(weight_map.values()))
    elif (path / SINGLE_FILE).is_file():
        files = [SINGLE_FILE]
    else:
        raise HFCheckpointError(f"{path}: neither {INDEX_FILE} nor {SINGLE_FILE} (only safetensors are read)")
    tensors: dict[str, torch.Tensor] = {}
    for name in files:
        tensors.update(load_file(str(path / name)))
    return tensors


def _unpermute(w: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Rows of a q/k projection from Hugging Face's rotate-half order back to interleaved pairs."""
    rows, cols = w.shape
    return w.view(n_heads, 2, rows // n_heads // 2, cols).transpose(1, 2).reshape(rows, cols)


def hf_to_native(tensors: dict[str, torch.Tensor], args: ModelArgs, *, tied: bool) -> dict[str, torch.Tensor]:
    """This model's state dict from a Llama checkpoint's tensors (names mapped, q/k rows permuted)."""
    tensors = {k.removeprefix("model."): v for k, v in tensors.items()}
    out = {
        "tok_embeddings.weight": tensors.pop("embed_tokens.weight"),
        "norm.weight": tensors.pop("norm.weight"),
    }
    head = tensors.pop("lm_head.weight", None)
    if head is None and not tied:
        raise HFCheckpointError("the checkpoint has no lm_head.weight and tie_word_embeddings is false")
    out["output.weight"] = out["tok_embeddings.weight"] if head is None else head
    names = {
        "self_attn.o_proj": "attention.wo",
        "self_attn.v_proj": "attention.wv",
        "mlp.gate_proj": "feed_forward.w1",
        "mlp.down_proj": "feed_forward.w2",
        "mlp.up_proj": "feed_forward.w3",
        "input_layernorm": "attention_norm",
        "post_attention_layernorm": "ffn_norm",
    }
    for i in range(args.n_layers):
        layer = f"layers.{i}."  # the same prefix in both layouts
        out[layer + "attention.wq.weight"] = _unpermute(tensors.pop(layer + "self_attn.q_proj.weight"), args.n_heads)
        out[layer + "attention.wk.weight"] = _unpermute(tensors.pop(layer + "self_attn.k_proj.weight"), args.n_kv_heads)
        for hf_name, name in names.items():
            out[f"{layer}{name}.weight"] = tensors.pop(f"{layer}{hf_name}.weight")
    leftover = sorted(k for k in tensors if not k.endswith("rotary_emb.inv_freq"))
    if leftover:
        raise HFCheckpointError(f"tensors this model has no place for: {', '.join(leftover[:8])}")
    return out


def hf_state_dict(path: str | Path, args: ModelArgs) -> dict[str, torch.Tensor]:
    """The fp32 state dict of :class:`~training.model.llama.Transformer` ``args`` from the checkpoint at ``path``."""
    path = Path(path)
    tied = bool(_config(path).get("tie_word_embeddings", False))
    try:
        native = hf_to_native(_read_tensors(path), args, tied=tied)
    except KeyError as exc:
        raise HFCheckpointError(f"{path}: tensor {exc.args[0]} is missing") from None
    return {k: v.float() for k, v in native.items()}


def load_hf_weights(model: nn.Module, path: str | Path, *, rank: int) -> int:
    """Load the checkpoint into ``model`` (FSDP2-sharded or not): rank 0 reads the files and broadcasts.

    Collective when a process group is initialised: an error on rank 0 is raised on every rank. Returns the
    number of tensors loaded.
    """
    import torch.distributed as dist
    from torch.distributed.checkpoint.state_dict import StateDictOptions, set_model_state_dict

    distributed = dist.is_initialized()
    full: dict[str, torch.Tensor] = {}
    error: str | None = None
    if rank == 0:
        try:
            full = hf_state_dict(path, model.args)  # type: ignore[arg-type]
            want = {k: tuple(v.shape) for k, v in model.state_dict().items()}  # DTensors report global shapes
            got = {k: tuple(v.shape) for k, v in full.items()}
            bad = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
            if bad:
                error = f"{path}: shapes do not match the model for {', '.join(bad[:5])}"
        except (HFCheckpointError, OSError) as exc:
            error = str(exc)
    if distributed:
        box = [error]
        dist.broadcast_object_list(box, src=0)
        error = box[0]
    if error is not None:
        raise HFCheckpointError(error)
    options = StateDictOptions(full_state_dict=True, broadcast_from_rank0=distributed)
    set_model_state_dict(model, full, options=options)
    return len(full)
