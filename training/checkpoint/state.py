"""The checkpointed application state (a DCP ``Stateful``) and the state digest, computed per shard.

Layout of :meth:`AppState.state_dict` (DCP flattens the nesting into dotted keys)::

    model      sharded (DTensor) model state, from ``get_state_dict``
    optim      sharded optimizer state, keyed by parameter FQN
    sampler    {position, seed, n_samples}: global, identical on every rank
    step       optimizer steps completed
    rank_<r>   per-rank: RNG states (torch tensor + pickled python/numpy) and pickled ``extra`` Statefuls

Per-rank entries use distinct keys so DCP keeps one per rank. On load a rank reads its own entry,
or rank 0's when the checkpoint was written by a smaller world (see :meth:`AppState.prepare_load`).
"""

from __future__ import annotations

import hashlib
import json
import pickle
import random
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful
from torch.distributed.tensor import DTensor

from training.data.dataset import ResumableSampler


def rng_state() -> dict[str, Any]:
    """This process's RNG states: torch CPU (tensor), python and numpy (pickled bytes)."""
    return {
        "torch": torch.get_rng_state(),
        "host": pickle.dumps({"python": random.getstate(), "numpy": np.random.get_state()}),
    }


def set_rng_state(state: Mapping[str, Any]) -> None:
    torch.set_rng_state(state["torch"])
    host = pickle.loads(state["host"])
    random.setstate(host["python"])
    np.random.set_state(host["numpy"])


class AppState(Stateful):
    """Model, optimizer, sampler, step, RNG and the ``extra`` Statefuls of other components."""

    def __init__(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        sampler: ResumableSampler,
        *,
        rank: int,
        extra: Mapping[str, Stateful] | None = None,
    ) -> None:
        self.model = model
        self.optimizer = optimizer
        self.sampler = sampler
        self.rank = rank
        self.extra: dict[str, Stateful] = dict(extra or {})
        self.step = 0
        self._source_rank = rank
        #: Moves with every :meth:`load_state_dict` (which replaces the optimizer's state tensors).
        self.generation = 0

    def prepare_load(self, checkpoint_keys: Iterable[str]) -> int:
        """Pick which rank's per-rank entry to read from a checkpoint's flattened keys; returns that rank."""
        prefix = f"app.rank_{self.rank}."
        self._source_rank = self.rank if any(k.startswith(prefix) for k in checkpoint_keys) else 0
        return self._source_rank

    def state_dict(self) -> dict[str, Any]:
        return {**self.tensor_state(), **self.host_state()}

    def tensor_state(self) -> dict[str, Any]:
        """The model's and optimizer's state: the live tensors themselves (views, not copies), so the same dict
        shows every later step's values until :attr:`generation` moves (a load replaces the optimizer's tensors)."""
        msd, osd = get_state_dict(self.model, self.optimizer)
        return {"model": msd, "optim": osd}

    def host_state(self) -> dict[str, Any]:
        """The small rest of :meth:`state_dict`: sampler, step, this rank's RNG and extra state."""
        return {
            "sampler": self.sampler.state_dict(),
            "step": self.step,
            f"rank_{self._source_rank}": {
                "rng": rng_state(),
                "extra": {name: pickle.dumps(s.state_dict()) for name, s in sorted(self.extra.items())},
            },
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        set_state_dict(
            self.model, self.optimizer, model_state_dict=state_dict["model"], optim_state_dict=state_dict["optim"]
        )
        self.sampler.load_state_dict(state_dict["sampler"])
        self.step = int(state_dict["step"])
        mine = state_dict[f"rank_{self._source_rank}"]
        set_rng_state(mine["rng"])
        for name, blob in mine["extra"].items():
            if name in self.extra:
                self.extra[name].load_state_dict(pickle.loads(blob))
        self._source_rank = self.rank
        self.generation += 1


def _hash_value(h: Any, key: str, value: Any) -> None:
    """Hash a replicated value (no DTensor) in canonical (sorted-key) order."""
    h.update(key.encode() + b"\0")
    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous().reshape(-1)
        h.update(f"{t.dtype}{tuple(value.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    elif isinstance(value, Mapping):
        for k in sorted(value, key=str):
            _hash_value(h, f"{key}.{k}", value[k])
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            _hash_value(h, f"{key}[{i}]", v)
    else:
        h.update(json.dumps(value, default=repr).encode())


def _leaves(key: str, value: Any, out: dict[str, Any]) -> None:
    """The DTensors of a state dict by dotted key; every other value under its own key as well (whole)."""
    if isinstance(value, Mapping) and not isinstance(value, torch.Tensor):
        for k in sorted(value, key=str):
            _leaves(f"{key}.{k}", value[k], out)
    else:
        out[key] = value


def _row_digests(local: torch.Tensor) -> bytes:
    """The sha256 of each row (index along dim 0) of a local shard, concatenated."""
    t = local.detach().cpu().contiguous()
    rows = t.reshape(t.shape[0], -1) if t.dim() else t.reshape(1, -1)
    data = rows.view(torch.uint8).numpy() if rows.numel() else None
    return b"".join(hashlib.sha256(data[i].tobytes() if data is not None else b"").digest() for i in range(len(rows)))


def shard_digests(model: nn.Module, optimizer: torch.optim.Optimizer) -> dict[str, tuple[str, bytes]]:
    """This rank's part of the state digest: per key, ``("rows", row digests)`` of its shard of a dim-0-sharded
    DTensor, or ``("whole", digest)`` of a replicated value. Only digests leave the rank, never tensor data."""
    msd, osd = get_state_dict(model, optimizer)
    leaves: dict[str, Any] = {}
    _leaves("model", msd, leaves)
    _leaves("optim", osd, leaves)
    out: dict[str, tuple[str, bytes]] = {}
    for key, value in leaves.items():
        if isinstance(value, DTensor) and all(p.is_shard(0) or p.is_replicate() for p in value.placements):
            header = f"{value.dtype}{tuple(value.shape)}".encode()
            if any(p.is_shard(0) for p in value.placements):
                out[key] = ("rows", header + b"\0" + _row_digests(value.to_local()))
                continue
            value = value.to_local()
        h = hashlib.sha256()
        _hash_value(h, key, value)
        out[key] = ("whole", h.digest())
    return out


def combine_digests(shards: list[dict[str, tuple[str, bytes]]]) -> str:
    """The state digest from every rank's :func:`shard_digests`, in rank order: per key (sorted), the row digests of
    all ranks in order (FSDP2 shards dim 0 in rank order), or rank 0's digest of a replicated value. The rows are
    the unit, so the digest does not depend on how many ranks shared the state."""
    h = hashlib.sha256()
    for key in sorted(shards[0]):
        kind, first = shards[0][key]
        h.update(key.encode() + b"\0")
        if kind == "whole":
            h.update(first)
            continue
        h.update(first.split(b"\0", 1)[0])
        for shard in shards:
            h.update(shard[key][1].split(b"\0", 1)[1])
    return h.hexdigest()


def state_digest(model: nn.Module, optimizer: torch.optim.Optimizer) -> str:
    """sha256 of the model + optimizer state, computed per shard: each rank hashes the rows of its own shard, rank 0
    gathers the digests (32 bytes a row, never the tensors) and combines them (:func:`combine_digests`), and every
    rank returns rank 0's result. Equal for equal states whatever the number of ranks (a resharded restore
    compares). Collective: every rank must call it.
    """
    mine = shard_digests(model, optimizer)
    if not dist.is_initialized():
        return combine_digests([mine])
    rank, world = dist.get_rank(), dist.get_world_size()
    gathered: list[Any] | None = [None] * world if rank == 0 else None
    dist.gather_object(mine, gathered, dst=0)
    box = [combine_digests(gathered) if gathered is not None else ""]
    dist.broadcast_object_list(box, src=0)
    return box[0]
