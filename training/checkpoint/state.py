"""The checkpointed application state (a DCP ``Stateful``) and the canonical full-state digest.

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
from torch.distributed.checkpoint.state_dict import StateDictOptions, get_state_dict, set_state_dict
from torch.distributed.checkpoint.stateful import Stateful

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

    def prepare_load(self, checkpoint_keys: Iterable[str]) -> int:
        """Pick which rank's per-rank entry to read from a checkpoint's flattened keys; returns that rank."""
        prefix = f"app.rank_{self.rank}."
        self._source_rank = self.rank if any(k.startswith(prefix) for k in checkpoint_keys) else 0
        return self._source_rank

    def state_dict(self) -> dict[str, Any]:
        msd, osd = get_state_dict(self.model, self.optimizer)
        own = self._source_rank
        return {
            "model": msd,
            "optim": osd,
            "sampler": self.sampler.state_dict(),
            "step": self.step,
            f"rank_{own}": {
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


def _hash_value(h: Any, key: str, value: Any) -> None:
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


def state_digest(model: nn.Module, optimizer: torch.optim.Optimizer) -> str:
    """sha256 of the full (unsharded) model + optimizer state in canonical (sorted-key) order.

    Collective: every rank must call it; all ranks return rank 0's digest.
    """
    opts = StateDictOptions(full_state_dict=True, cpu_offload=True)
    msd, osd = get_state_dict(model, optimizer, options=opts)
    digest = ""
    if not dist.is_initialized() or dist.get_rank() == 0:
        h = hashlib.sha256()
        _hash_value(h, "model", msd)
        _hash_value(h, "optim", osd)
        digest = h.hexdigest()
    if dist.is_initialized():
        box = [digest]
        dist.broadcast_object_list(box, src=0)
        digest = box[0]
    return digest
