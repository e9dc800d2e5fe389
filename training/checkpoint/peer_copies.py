"""The memory tier's gloo group and its copies on the peer node (:func:`training.checkpoint.replica.exchange`), which
recover after a failed exchange.

An exchange fails when a peer does not answer within gloo's deadline (a lost node, or a network blip), and the group
is not to be trusted after that. The ranks learn of it together: at each snapshot (on the training thread, before
the copy) they agree whether any rank's last exchange failed (a maximum over the default group), and then all of
them create a new group for the next try and skip the exchange for the snapshots in between: the first try is at that
same snapshot, then after 1, 3, 7 and at most :data:`MAX_SKIP` skipped snapshots while the tries keep failing. A try
that succeeds on every rank ends the back-off. Every decision is the same on every rank (it depends on agreed values
only), so the ranks create their groups at the same snapshot and skip the same ones.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from training.checkpoint import replica
from training.checkpoint.fingerprint import fingerprint
from training.checkpoint.hostbuf import Slot, decode_meta
from training.checkpoint.memory_restore import DATA_KEY

#: The most snapshots skipped between two tries of a failing exchange.
MAX_SKIP = 15


def skipped_after(failures: int) -> int:
    """Snapshots without an exchange before the next try, after ``failures`` failed rounds in a row."""
    return min(2 ** (failures - 1) - 1, MAX_SKIP) if failures > 0 else 0


class PeerCopies:
    """One rank's side of the peer copies. ``agree``: the element-wise maximum over the default group's ranks;
    ``write_slot``: the slot of an owner to write next; ``new_group``: makes the tier's group (collective)."""

    def __init__(
        self,
        rank: int,
        world_size: int,
        per_node: int,
        timeout_s: float,
        *,
        agree: Callable[[list[float]], list[float]],
        write_slot: Callable[[int], Slot],
        new_group: Callable[[], Any] | None = None,
    ) -> None:
        self.rank = rank
        self.dst, self.src = replica.peers(rank, world_size, per_node)
        timeout = datetime.timedelta(seconds=timeout_s)
        self._new_group = new_group or (lambda: dist.new_group(backend="gloo", timeout=timeout))
        self.pg = self._new_group() if dist.is_initialized() and world_size > 1 else None
        self.agree, self.write_slot = agree, write_slot
        self.failed: str | None = None  # why this rank's last exchange failed (set on the memtier thread)
        self.failures = 0  # rounds in a row that failed on some rank
        self.skip = 0  # snapshots still to go without an exchange
        self.now = False  # exchange at the current snapshot
        self.renew = False  # a new group before the next try
        #: Groups given up after a failed exchange: kept, not destroyed (destroying one waits for its timed-out work).
        self.retired: list[Any] = []

    @property
    def enabled(self) -> bool:
        return self.pg is not None and self.dst is not None and self.src is not None

    def before_snapshot(self, step: int) -> str | None:
        """Training thread, every rank at every snapshot, after the previous exchange ended: decide whether this
        snapshot is exchanged (:attr:`now`), on a new group after a failure. Collective where peer copies exist (one
        all-reduce on the default group). Returns the line that says what was decided after a failure, else None."""
        if not self.enabled:
            return None
        line = None
        if self.agree([1.0 if self.failed is not None else 0.0])[0] > 0:
            self.failures += 1
            self.skip, self.renew, self.failed = skipped_after(self.failures), True, None
            when = "at this snapshot" if self.skip == 0 else f"after {self.skip} snapshot(s) without peer copies"
            line = (
                f"a peer copy failed on some rank ({self.failures} round(s) in a row): the ranks try again {when}, on "
                f"a new group (snapshot of step {step})"
            )
        elif self.now:  # the last try worked on every rank
            self.failures = 0
        self.now = self.skip == 0
        self.skip = max(0, self.skip - 1)
        if self.now and self.renew:
            self.retired.append(self.pg)
            self.pg, self.renew = self._new_group(), False
        return line

    def exchange(self, step: int, data: tuple[bytes, torch.Tensor] | None, report: Callable[[int, str], None]) -> bool:
        """Memtier thread: send this rank's snapshot ``(meta, bytes)`` to its peer and keep the peer's copy, if this
        snapshot is exchanged; whether a copy arrived and verified."""
        if not self.now:
            return False
        try:
            got = replica.exchange(self.pg, self.dst, self.src, data, self._peer_buf)  # type: ignore[arg-type]
            return got is not None and self._keep_peer_copy(*got)
        except Exception as exc:  # a lost peer or a blip: gloo's deadline; the group cannot be trusted any more
            self.failed = f"{type(exc).__name__}: {str(exc)[:300]}"
            report(step, f"peer copy failed, the ranks try again on a new group at a later snapshot: {self.failed}")
            return False

    def _peer_buf(self, nbytes: int) -> torch.Tensor:
        assert self.src is not None
        self._peer_slot = self.write_slot(self.src)
        self._peer_slot.invalidate()
        return self._peer_slot.data(nbytes)

    def _keep_peer_copy(self, payload: bytes, data: torch.Tensor) -> bool:
        """Publish a received copy if its meta and data fingerprints match (else it stays invalid, and says so)."""
        meta = decode_meta(payload)
        if meta is None or fingerprint(data[: meta["layout"].nbytes]) != meta.get(DATA_KEY):
            print(f"[checkpoint] rank {self.rank}: the peer copy from rank {self.src} failed its checksum", flush=True)
            return False
        self._peer_slot.write_meta(payload)
        return True
