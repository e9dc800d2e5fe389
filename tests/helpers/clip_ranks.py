"""Two ranks under torchrun: :func:`training.parallel.distributed.clip_grad_norm_` against torch's
``clip_grad_norm_(foreach=True)`` on the tiny model's FSDP2 gradients, bit for bit.

``python tests/helpers/clip_ranks.py OUT_DIR``: rank 0 writes ``OUT_DIR/result.json``: per case, both totals, whether
the totals and every local gradient shard are equal, and the clipped gradients' total norm.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import torch
import torch.nn.functional as F
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.fsdp import fully_shard

from training.model.llama import build_model
from training.parallel.distributed import clip_grad_norm_, destroy_process_group, init_process_group


def _gradients(rank: int, mesh=None) -> torch.nn.Module:
    """The tiny model (seed 0) sharded on ``mesh`` (default: every rank), after a backward on rank-own data."""
    torch.manual_seed(0)
    model = build_model("tiny", 259, max_seq_len=32)
    for block in model.layers:
        fully_shard(block, mesh=mesh)
    fully_shard(model, mesh=mesh)
    ids = torch.randint(0, 259, (4, 33), generator=torch.Generator().manual_seed(rank))
    logits = model(ids[:, :-1])
    F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1)).backward()
    return model


def _case(rank: int, max_norm: float, mesh=None) -> dict:
    theirs, ours = _gradients(rank, mesh), _gradients(rank, mesh)
    want = torch.nn.utils.clip_grad_norm_(theirs.parameters(), max_norm, foreach=True).full_tensor()
    got = clip_grad_norm_(ours.parameters(), max_norm)
    pairs = zip(theirs.parameters(), ours.parameters(), strict=True)
    shards = [(a.grad.to_local(), b.grad.to_local()) for a, b in pairs]
    after = torch.nn.utils.get_total_norm([p.grad for p in ours.parameters()]).full_tensor()
    return {
        "want": want.item(),
        "got": got.item(),
        "equal_total": bool(torch.equal(want, got)),
        "equal_shards": all(torch.equal(a, b) for a, b in shards),
        "norm_after": after.item(),
    }


def main() -> int:
    out = Path(sys.argv[1])
    rank, world = init_process_group(timeout_s=30)
    torch.use_deterministic_algorithms(True)
    result = {
        "clipped": _case(rank, 0.5),
        "not clipped": _case(rank, 1e6),
        # a mesh of one rank (each rank its own): DTensor reduces nothing there
        "mesh of one": _case(rank, 0.5, init_device_mesh("cpu", (world, 1), mesh_dim_names=("all", "own"))["own"]),
    }
    if rank == 0:
        (out / "result.json").write_text(json.dumps(result))
    destroy_process_group()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
