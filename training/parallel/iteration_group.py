"""The default process group of each in-process iteration, on a store prefix of its own, after every rank arrived.

The launchers give each worker generation a fresh store hosted by global rank 0 (ft_launcher with c10d, and torchrun
with ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` from the pod spec), so a generation never sees the keys of an earlier
one. Re-initialising with ``env://`` on in-process re-entry reused the previous iteration's keys (seen hanging under
ft_launcher), hence ``PrefixStore("train_iter<N>")``. The barrier first waits (up to ``inprocess.barrier_timeout_s``)
until every rank arrived, so a slow starter is not mistaken for a lost peer by gloo's much shorter connect timeout
(seen on 2 cores with 4 workers).
"""

from __future__ import annotations

import datetime
import os
from collections.abc import Mapping
from typing import Any

import torch.distributed as dist

from platform_config.schema import InprocessConfig
from training.parallel import background_abort, distributed


def agent_store(environ: Mapping[str, str] = os.environ) -> bool:
    """The launcher's agent hosts the store (``TORCHELASTIC_USE_AGENT_STORE``): no worker is its master."""
    return environ.get("TORCHELASTIC_USE_AGENT_STORE", "").lower() == "true"


def store_prefix(iteration: int, environ: Mapping[str, str] = os.environ) -> str:
    """The key prefix of ``iteration``. An agent's store outlives worker generations, so there the generation is
    named by its restart count as well (unset, empty or malformed: 0)."""
    if not agent_store(environ):
        return f"train_iter{iteration}"
    count = environ.get("TORCHELASTIC_RESTART_COUNT") or "0"
    return f"train_r{int(count) if count.isdigit() else 0}_iter{iteration}"


class IterationGroups:
    """One TCP store for the process (``MASTER_ADDR:MASTER_PORT``), one default group per :meth:`init`."""

    def __init__(self, inprocess: InprocessConfig) -> None:
        self.inprocess = inprocess
        self._store: Any = None

    def init(self, iteration: int, rank: int, world_size: int) -> dict[str, float | bool]:
        """The default group of ``iteration``, created once the failed iteration's groups no longer block it (with
        ``inprocess.abort: detached`` they are out of torch's registry already and their abort goes on beside this;
        with ``in_place`` this waits for it: :mod:`.background_abort`); a group an earlier iteration left alive is
        aborted first. Returns what the ``process_group`` phase event records: the seconds spent waiting for the
        abort (``abort_wait_s``) and whether an abort was still running as the group was created (``abort_running``).
        """
        timeout_s = distributed.collective_timeout_s(self.inprocess)
        if self._store is None:
            self._store = dist.TCPStore(
                os.environ["MASTER_ADDR"],
                int(os.environ["MASTER_PORT"]),
                world_size,
                is_master=rank == 0 and not agent_store(),
                timeout=datetime.timedelta(seconds=self.inprocess.barrier_timeout_s),
                multi_tenant=True,
                wait_for_workers=False,
            )
        store = dist.PrefixStore(store_prefix(iteration), self._store)
        distributed.store_barrier(store, world_size, self.inprocess.barrier_timeout_s)
        # The store is no process group: waiting for the peers above overlaps the failed iteration's abort.
        waited = background_abort.await_abort(self.inprocess.barrier_timeout_s)
        if iteration > 0 and dist.is_initialized():  # NVRx's abort normally destroyed it; never reuse a broken one
            print(f"[train] rank {rank}: process group of iteration {iteration - 1} still alive; aborting it")
            distributed.abort_process_group()
        running = background_abort.running()
        distributed.init_process_group(timeout_s=timeout_s, store=store, rank=rank, world_size=world_size)
        return {"abort_wait_s": round(waited, 4), "abort_running": running}
