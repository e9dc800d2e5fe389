"""``ft_launcher`` (NVRx's ``nvidia_resiliency_ext.fault_tolerance.launcher``) without the idle second of its barrier
rendezvous: ``python -m training.resilience.ft_launcher ARGS`` is ``ft_launcher ARGS``.

NVRx 0.6 and later rendezvous in rounds (``ft_rendezvous_barrier``). A launcher whose workers failed opens the next
round itself, then rejoins: step 0 (``_RendezvousBarrierState._wait_for_rendezvous_open``) finds the round it last
knew closed, syncs to the one it just opened, and then sleeps a fixed 1 s before it looks again (NVRx 0.7.0, and its
main branch of 2026-08-07). Every ft_launcher restart paid that second: the launcher log says "Round N closed
(training in progress), waiting for next round..." and the join follows 1.0 s later. :func:`sync_before_waiting`
makes step 0 sync first, so a round already open is joined at once; a round not open yet is waited for as before.
NVRx releases without the barrier rendezvous (0.4.1 on the CPU machines) have nothing to change. NVRx's launcher
module then runs as ``python -m`` runs it (its logging and socket names take this process's id when it loads).
"""

from __future__ import annotations

import runpy
import sys
from typing import Any

import nvidia_resiliency_ext.fault_tolerance.launcher as nvrx_launcher  # imported by a worker template, to be warm

#: What step 0 needs of NVRx's round state for the change.
ROUND_STATE_METHODS = ("_wait_for_rendezvous_open", "_sync_from_per_round_state")


def sync_before_waiting() -> str:
    """Make NVRx's step 0 sync to the newest round before it waits (once per process). Returns what was done:
    ``synced`` (the change is in place), ``no barrier rendezvous`` (this NVRx has none: nothing to change), or why
    this NVRx's round state does not allow it (then it runs as it is, a second slower per restart)."""
    try:
        from nvidia_resiliency_ext.fault_tolerance import ft_rendezvous_barrier
    except ImportError:
        return "no barrier rendezvous"
    state = getattr(ft_rendezvous_barrier, "_RendezvousBarrierState", None)
    lacking = [name for name in ROUND_STATE_METHODS if not callable(getattr(state, name, None))]
    if lacking:
        return f"NVRx's _RendezvousBarrierState lacks {', '.join(lacking)}"
    wait = state._wait_for_rendezvous_open
    if getattr(wait, "syncs_first", False):
        return "synced"

    def wait_for_rendezvous_open(self: Any, *args: Any, **kwargs: Any) -> None:
        self._sync_from_per_round_state()  # what step 0 does after its first look, minus the 1 s sleep before the next
        wait(self, *args, **kwargs)

    wait_for_rendezvous_open.syncs_first = True  # type: ignore[attr-defined]
    state._wait_for_rendezvous_open = wait_for_rendezvous_open
    return "synced"


def main() -> None:
    """Run NVRx's ft_launcher module as ``python -m`` would, with this process's arguments, after
    :func:`sync_before_waiting`."""
    done = sync_before_waiting()
    if done not in ("synced", "no barrier rendezvous"):
        print(f"[ft_launcher] {done}: each restart's rendezvous waits NVRx's 1 s poll", file=sys.stderr, flush=True)
    runpy.run_module(nvrx_launcher.__name__, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
