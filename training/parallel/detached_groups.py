"""A failed iteration's process groups taken out of torch's registry at once and aborted afterwards, beside the next
iteration's work.

NCCL's abort of a communicator takes about a second (0.95-1.0 s on one H100 whatever it aborts:
``benchmarks/nccl_abort.py``), and torch keeps one default group per process: after NVRx's own abort (abort every
group's communicators, then ``destroy_process_group()``) the next iteration could create its group only once that
second was over. :func:`detach` does to torch's registry what ``destroy_process_group()`` does (the default group,
the group maps, the C++ name registry, the name counter) without shutting any group down, in microseconds;
:func:`abort` then aborts the detached groups' NCCL communicators (one thread per group, as NVRx's
``AbortTorchDistributed`` does) and shuts every group down, on the ``pg-abort`` thread, while the next iteration
builds its own group.

The registry is torch's private state (``torch.distributed.distributed_c10d._world`` and two helpers).
:func:`missing` names what a torch release lacks of it; the caller then aborts in place and says so. NVRx's
flight-recorder trace collection (``NVRX_FR_TRACE_PATH``), which this project does not turn on, is part of the
in-place abort only.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

#: The maps of ``_world`` that ``destroy_process_group()`` clears.
REGISTRY_MAPS = (
    "pg_map",
    "pg_names",
    "pg_group_ranks",
    "pg_backend_config",
    "pg_to_tag",
    "tags_to_pg",
    "pg_coalesce_state",
)
#: The functions of ``distributed_c10d`` it calls to forget the default group and the C++ name registry.
REGISTRY_HELPERS = ("_update_default_pg", "_unregister_all_process_groups")


@dataclass
class Detached:
    """Groups no longer known to torch, still alive until :func:`abort` shuts them down."""

    #: In the order ``destroy_process_group()`` shuts them down (newest name first).
    groups: list[Any] = field(default_factory=list)
    #: torchcomms communicators (torch releases that have them), finalized before the groups are shut down.
    comms: list[Any] = field(default_factory=list)


def missing() -> list[str]:
    """What :func:`detach` needs and this torch lacks (empty: it can detach)."""
    c10d = dist.distributed_c10d
    world = getattr(c10d, "_world", None)
    names = [f"_world.{name}" for name in (*REGISTRY_MAPS, "group_count") if not hasattr(world, name)]
    names += [name for name in REGISTRY_HELPERS if not callable(getattr(c10d, name, None))]
    return names + ([] if hasattr(dist.ProcessGroup, "shutdown") else ["ProcessGroup.shutdown"])


def detach() -> Detached:
    """Take every process group out of torch's registry without shutting it down: afterwards
    ``dist.is_initialized()`` is False and a new default group can be created at once."""
    c10d = dist.distributed_c10d
    world = c10d._world
    groups = sorted(world.pg_names, key=lambda group: world.pg_names[group], reverse=True)
    comms = list(getattr(world, "comms", ()))
    if comms:
        world.comms.clear()
    c10d._update_default_pg(None)
    for name in REGISTRY_MAPS:
        getattr(world, name).clear()
    c10d._unregister_all_process_groups()
    world.group_count = 0  # a re-created world names its groups from 0 again, as after destroy_process_group()
    return Detached(groups=groups, comms=comms)


def abort(detached: Detached) -> None:
    """Abort the NCCL communicators of every detached group (concurrently), then finalize the torchcomms communicators
    and shut every group down. The first error is raised once all of them were tried."""
    errors: list[BaseException] = []
    if detached.groups:
        with ThreadPoolExecutor(max_workers=len(detached.groups), thread_name_prefix="pg-abort") as pool:
            futures = [pool.submit(_abort_nccl, group) for group in detached.groups]
        errors += [exc for exc in (future.exception() for future in futures) if exc is not None]
    for step in [*(comm.finalize for comm in detached.comms), *(group.shutdown for group in detached.groups)]:
        try:
            step()
        except Exception as exc:  # every group is shut down; the first error is raised below
            errors.append(exc)
    detached.groups.clear()
    detached.comms.clear()
    if errors:
        raise errors[0]


def _abort_nccl(group: Any) -> None:
    """Abort ``group``'s NCCL backend, if it has one (its pending collectives fail at once). A group without a CUDA
    backend (gloo) has nothing to abort: the shutdown ends it."""
    nccl = getattr(dist.distributed_c10d, "ProcessGroupNCCL", None)
    if nccl is None or not torch.cuda.is_available():
        return
    try:
        backend = group._get_backend(torch.device("cuda"))
    except RuntimeError:  # torch's way of saying the group has no CUDA backend
        return
    if isinstance(backend, nccl):
        backend.abort()
