"""Test-only entry (one process): an async save through NVRx's path on CPU tensors, healthy, onto a full disk, or
interrupted by an in-process restart.

``python -m tests.helpers.nvrx_saves PORT RUN_DIR CKPT_ROOT {dev-full,as-is,threads,copy,restart}``: ``dev-full``
points the shard's file at ``/dev/full`` (a real ENOSPC anywhere); ``as-is`` writes into CKPT_ROOT, e.g. on a full
tmpfs. The training loop's per-step poll (``maybe_finalize``) runs until it raises; the script prints what it raised
and the ``ckpt_failed`` errors. ``threads`` is the healthy case with 3 NVRx writer processes
(``checkpoint.write_threads``): it prints the committed files and whether a restore brings the saved state back.
``copy``: the same with one writer and ``cuda-copy`` staging, every tensor copied (on this CPU none is on a device),
the live state trained a step further while the write is in flight. ``restart``: an in-process restart
(``abandon_async_saves``) while a slow write is in flight, then the next iteration's restore and save of the same
step on the writer it reuses; it prints the writer pids, the stale wait and the committed step's restore. :func:`run`
starts it and returns its output.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def run(run_dir: Path, ckpt_root: Path, how: str, timeout_s: float = 120) -> str:
    """Run this script forked from the tests' worker template (a one-rank gloo group on a free port; it ends with
    ``os._exit`` itself); its stdout."""
    from tests.helpers.training_runs import forked_stdout, free_port

    return forked_stdout(__name__, [str(free_port()), str(run_dir), str(ckpt_root), how], timeout_s)


def main() -> None:
    import torch.distributed as dist

    port, run_dir, ckpt_root, how = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3]), sys.argv[4]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    from tests.helpers.nvrx_cpu import CpuNvrx
    from tests.helpers.training_runs import tiny_app_state, tiny_train_step
    from training.checkpoint.manager import CheckpointManager
    from training.telemetry.events import EventLog

    if how == "dev-full":
        tmp = ckpt_root / "step_00000001.tmp"
        tmp.mkdir(parents=True)
        (tmp / "__0_0.distcp").symlink_to("/dev/full")  # NVRx's writer process hits a real ENOSPC on the shard
    events = EventLog(run_dir, 0)
    threads = 3 if how == "threads" else 1
    nvrx = CpuNvrx("cuda-copy" if how == "copy" else "cuda-ipc", write_threads=threads)
    if how == "copy":
        from training.checkpoint.save_copy import SaveCopy

        nvrx.save_copy = SaveCopy(room=lambda n: n, copied=lambda t: True)
    delay = 0.5 if how in ("restart", "copy") else None  # the write is still in flight at the restart, or the step
    mgr = CheckpointManager(
        ckpt_root, "async", 2, events, 0, 1, collective_timeout_s=10, nvrx=nvrx, write_delay_s=delay
    )
    state = tiny_app_state(0)
    tiny_train_step(state)
    mgr.save(1, state)
    if how in ("threads", "copy"):
        _restore_after_commit(mgr, state, ckpt_root, moved_on=how == "copy")
    elif how == "restart":
        mgr = _restart_during_the_write(mgr, state, ckpt_root, events, run_dir)
    else:
        _poll_until_it_raises(mgr, run_dir)
    mgr.close(collective=False)
    for child in multiprocessing.active_children():  # the parked writer, NVRx's write-results queue manager
        child.terminate()
        child.join()
    os._exit(0)  # as training.train does: a parked PersistentAsyncCaller's __del__ would wait for its killed worker


def _poll_until_it_raises(mgr: Any, run_dir: Path) -> None:
    """The training loop's per-step poll until it raises; print what it raised and the ``ckpt_failed`` errors."""
    from training.checkpoint.errors import CheckpointWriteError
    from training.telemetry.events import read_events

    try:
        for _ in range(300):  # the training loop polls once per step
            mgr.maybe_finalize()
            time.sleep(0.1)
        print("no error", flush=True)
    except CheckpointWriteError as exc:
        print("maybe_finalize raised:", exc, flush=True)
    print("ckpt_failed:", [e["error"] for e in read_events(run_dir) if e["event"] == "ckpt_failed"], flush=True)


def _restart_during_the_write(mgr: Any, state: Any, ckpt_root: Path, events: Any, run_dir: Path) -> Any:
    """What an in-process restart does to a save in flight on the NVRx path: the failed iteration's teardown and
    the in-process layer's hook abandon it, its writer is kept and finishes the write, and the next iteration
    restores (deleting the unfinished directory) and saves the same step again on that writer, waiting for the old
    write first; the save then commits and restores."""
    from tests.helpers.nvrx_cpu import CpuNvrx
    from training.checkpoint.manager import CheckpointManager, abandon_async_saves
    from training.telemetry.events import read_events

    writer = mgr.io.nvrx.queue.persistent_caller.process
    mgr.close(collective=False)  # the failed iteration's teardown, step 1's write sleeping in the writer
    abandon_async_saves()  # the in-process layer's hook
    again = CheckpointManager(ckpt_root, "async", 2, events, 0, 1, collective_timeout_s=10, nvrx=CpuNvrx())
    reused = again.io.nvrx.queue.persistent_caller.process
    print("writer kept", writer.pid == reused.pid, "owes", again.io.nvrx.parked.stale > 0, flush=True)
    print("restored before", again.load_latest(state), flush=True)  # nothing committed yet: a fresh start
    again.save(1, state)
    _restore_after_commit(again, state, ckpt_root)
    staged = [e for e in read_events(run_dir) if e["event"] == "ckpt_staged"]
    print("stale wait", [e.get("stale_wait_s", 0) > 0 for e in staged], flush=True)
    print("writer alive", reused.is_alive(), flush=True)
    return again


def _restore_after_commit(mgr: Any, state: Any, ckpt_root: Path, *, moved_on: bool = False) -> None:
    """Wait for the save's commit, print its files, and restore it into a state trained one step further
    (``moved_on``: that step is trained at once, while the write is still in flight)."""
    import torch

    from tests.helpers.training_runs import tiny_train_step

    def weights() -> dict[str, Any]:
        return {k: v.to_local().clone() for k, v in state.model.state_dict().items()}

    saved = weights()
    if moved_on:
        tiny_train_step(state)
        print("trained on during the write:", not (ckpt_root / "step_00000001").is_dir(), flush=True)
    for _ in range(300):
        mgr.maybe_finalize()
        if (ckpt_root / "step_00000001").is_dir():
            break
        time.sleep(0.1)
    print("files:", sorted(p.name for p in (ckpt_root / "step_00000001").iterdir()), flush=True)
    tiny_train_step(state)  # the live weights move on; the restore must bring step 1's back
    step = mgr.load_latest(state)
    same = all(torch.equal(saved[k], v) for k, v in weights().items())
    print("restored step", step, "same weights", same, flush=True)


if __name__ == "__main__":
    main()
