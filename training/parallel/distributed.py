"""Process-group setup and FSDP2 sharding (gloo + fp32 on CPU, NCCL + bf16 on CUDA)."""

from __future__ import annotations

import datetime
import os
import random
import time
from collections.abc import Iterable

import numpy as np
import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.device_mesh import DeviceMesh
from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
from torch.distributed.tensor import DTensor, Shard

from platform_config.schema import InprocessConfig


def device() -> torch.device:
    """``cuda:LOCAL_RANK`` when CUDA is available, else CPU."""
    if torch.cuda.is_available():
        return torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")) % torch.cuda.device_count())
    return torch.device("cpu")


def device_capacity() -> tuple[int, str]:
    """The memory this rank trains in, in bytes, and its name: its GPU's, else the host's shared by the node's
    ``LOCAL_WORLD_SIZE`` ranks."""
    if torch.cuda.is_available():
        dev = device()
        props = torch.cuda.get_device_properties(dev)
        return int(props.total_memory), f"{dev} ({props.name})"
    ranks = max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1")))
    host = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    return host // ranks, f"host memory per local rank ({ranks} on this host)"


def device_memory_mb() -> dict[str, float]:
    """This process's CUDA memory, allocated and reserved by torch's caching allocator, in MiB; empty on CPU. Logged at
    every (re-)start, so that memory a fault left behind (a killed writer's shared tensors) shows as growth."""
    if not torch.cuda.is_available():
        return {}
    mib = 2**20
    return {
        "cuda_allocated_mb": round(torch.cuda.memory_allocated() / mib, 1),
        "cuda_reserved_mb": round(torch.cuda.memory_reserved() / mib, 1),
    }


def default_backend() -> str:
    return "nccl" if torch.cuda.is_available() else "gloo"


def collective_timeout_s(inprocess: InprocessConfig) -> float:
    """Timeout of the default process group's collectives.

    gloo (CPU): ``gloo_timeout_s`` - gloo collectives cannot be aborted, so a short timeout is how a peer of a
    failed rank gets out of a collective. NCCL (CUDA): NVRx requires the NCCL watchdog timeout to exceed the
    in-process ``hard_timeout`` (the watchdog would otherwise kill the process before the Wrapper aborts the
    communicator and restarts in place), so ``barrier_timeout_s`` (validated > hard_timeout) is used.
    """
    return inprocess.barrier_timeout_s if default_backend() == "nccl" else inprocess.gloo_timeout_s


def checkpoint_timeout_s(inprocess: InprocessConfig) -> float:
    """Deadline of every collective on the checkpoint process group (gloo, on CPU and on CUDA): ``gloo_timeout_s``.

    NVRx cannot abort a gloo collective, so a rank blocked in one (a peer faulted during restore, verification,
    ``dcp.load`` or a save agreement) must leave it before the in-process hard timeout kills the process; the
    config validates ``gloo_timeout_s < hard_timeout_s``. Never the default group's timeout: on NCCL that is
    ``barrier_timeout_s``, above the hard timeout by design (see :func:`collective_timeout_s`).
    """
    return inprocess.gloo_timeout_s


def init_process_group(
    backend: str | None = None,
    timeout_s: float = 60.0,
    *,
    store: dist.Store | None = None,
    rank: int | None = None,
    world_size: int | None = None,
) -> tuple[int, int]:
    """Initialise the default group from RANK/WORLD_SIZE/MASTER_ADDR/MASTER_PORT (or a passed store).

    Returns ``(rank, world_size)``. Idempotent when a group already exists.
    """
    if dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    backend = backend or default_backend()
    dev = device()
    if dev.type == "cuda":
        torch.cuda.set_device(dev)
    kwargs: dict = {"backend": backend, "timeout": datetime.timedelta(seconds=timeout_s)}
    if store is not None:
        kwargs.update(
            store=store,
            rank=rank if rank is not None else int(os.environ["RANK"]),
            world_size=world_size if world_size is not None else int(os.environ["WORLD_SIZE"]),
        )
    elif rank is not None and world_size is not None:
        kwargs.update(rank=rank, world_size=world_size, init_method="env://")
    if backend == "nccl":
        kwargs["device_id"] = dev
    dist.init_process_group(**kwargs)
    return dist.get_rank(), dist.get_world_size()


def any_rank(flag: bool, dev: torch.device) -> bool:
    """Whether ``flag`` holds on any rank (a MAX all-reduce on the default group; ``flag`` itself without one)."""
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return flag
    t = torch.tensor([int(flag)], device=dev)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def store_barrier(store: dist.Store, world_size: int, timeout_s: float, *, poll_s: float = 0.05) -> None:
    """Wait until ``world_size`` processes called this on ``store`` (each adds one to a counter once).

    Raises ``TimeoutError`` naming how many arrived. Used before creating a process group, whose own connect timeout
    is the short collective timeout on gloo.
    """
    key = "barrier/arrived"
    arrived = store.add(key, 1)
    deadline = time.monotonic() + timeout_s
    while arrived < world_size:
        if time.monotonic() > deadline:
            raise TimeoutError(f"store barrier: {arrived} of {world_size} ranks arrived within {timeout_s:g} s")
        time.sleep(poll_s)
        arrived = store.add(key, 0)


def destroy_process_group() -> None:
    """Destroy the default group if one exists (safe to call twice)."""
    if dist.is_initialized():
        dist.destroy_process_group()


def abort_communicators() -> bool:
    """Abort every NCCL communicator of the default group (pending collectives fail; the group object stays).

    Returns False, doing nothing, without a group or on gloo (which has no abort). The one use of torch's
    private ``_abort_process_group``.
    """
    if not dist.is_initialized() or dist.get_backend() != "nccl":
        return False
    dist.distributed_c10d._abort_process_group()
    return True


def abort_process_group() -> None:
    """Abort the default group's NCCL communicators (pending collectives fail), then destroy the group.

    Unlike a plain destroy this does not wait for in-flight collectives. gloo has no abort: destroy only.
    """
    abort_communicators()
    destroy_process_group()


def set_determinism(seed: int) -> None:
    """Seed torch/numpy/python and turn deterministic algorithms on (CUDA: warn-only for SDPA kernels)."""
    if torch.cuda.is_available():
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)
    torch.use_deterministic_algorithms(True, warn_only=torch.cuda.is_available())


@torch.no_grad()
def clip_grad_norm_(parameters: Iterable[torch.Tensor], max_norm: float) -> torch.Tensor:
    """Scale the gradients to a total 2-norm of at most ``max_norm``; returns the total norm, the same on every rank.

    Bit for bit what ``torch.nn.utils.clip_grad_norm_(parameters, max_norm, foreach=True)`` computes for FSDP2's
    gradients (``Shard`` DTensors of one 1-D mesh), on their local shards: each shard's norm (``_foreach_norm``),
    squared, summed over the mesh in one all-reduce and rooted (DTensor's partial-norm reduction, which it skips on a
    mesh of one rank), the norm of those norms, and every gradient scaled by ``max_norm / (norm + 1e-6)`` clamped at
    1. torch's own takes each of those ops through DTensor's sharding propagation, whose cache every new process
    starts empty: its first call cost 0.09-0.11 CPU-s on the 2-core machine against 0.002-0.004 here, at every
    worker start (each launch and restart). Other gradients (plain tensors, several meshes, dtypes or devices) go to
    torch's.
    """
    params = list(parameters)
    grads = [p.grad for p in params if p.grad is not None]
    mesh = _shard_mesh(grads)
    if mesh is None:
        return torch.nn.utils.clip_grad_norm_(params, max_norm, foreach=True)
    local = [g.to_local() for g in grads]
    norms = torch.stack(torch._foreach_norm(local, 2.0))
    if mesh.size() > 1:
        squares = norms**2.0
        dist.all_reduce(squares, group=mesh.get_group())
        norms = squares ** (1.0 / 2.0)
    total = torch.linalg.vector_norm(norms, 2.0)
    torch._foreach_mul_(local, torch.clamp(float(max_norm) / (total + 1e-6), max=1.0))
    return total


def _shard_mesh(grads: list[torch.Tensor]) -> DeviceMesh | None:
    """The 1-D mesh every one of ``grads`` is a ``Shard`` DTensor of, all of one device and dtype; else ``None``."""
    if not grads or not all(isinstance(g, DTensor) for g in grads):
        return None
    mesh = grads[0].device_mesh
    if mesh.ndim != 1 or len({(g.device, g.dtype) for g in grads}) != 1:
        return None
    if any(g.device_mesh != mesh or not isinstance(g.placements[0], Shard) for g in grads):
        return None
    return mesh


def mixed_precision_policy(dev: torch.device) -> MixedPrecisionPolicy:
    """bf16 compute with fp32 gradient reduction on CUDA; plain fp32 on CPU."""
    if dev.type == "cuda":
        return MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=torch.float32)
    return MixedPrecisionPolicy(param_dtype=torch.float32, reduce_dtype=torch.float32)


def apply_fsdp(model: nn.Module, dev: torch.device | None = None) -> nn.Module:
    """Shard every transformer block, then the root, with FSDP2 ``fully_shard`` (model moved to ``dev`` first).

    A model built on the meta device is sharded there, then only this rank's shards are allocated on ``dev``
    (``to_empty``: uninitialised; the caller fills them, from a checkpoint or an initialisation, and recomputes
    non-persistent buffers)."""
    dev = dev or device()
    on_meta = any(p.is_meta for p in model.parameters())
    if not on_meta:
        model.to(dev)
    mp = mixed_precision_policy(dev)
    layers = getattr(model, "layers", [])
    for i, block in enumerate(layers):
        # The last block's parameters are needed right away by backward: keep them gathered.
        fully_shard(block, mp_policy=mp, reshard_after_forward=i < len(layers) - 1)
    fully_shard(model, mp_policy=mp)
    if on_meta:
        model.to_empty(device=dev)
    return model
