"""NVRx's async path with a real NVRx queue and writer process (0.4.1 here; CUDA-free requests only)."""

from __future__ import annotations

import queue
from pathlib import Path

import pytest

from tests.helpers import nvrx_saves


def test_abandoning_nvrx_async_replaces_the_write_results_queue(monkeypatch: pytest.MonkeyPatch) -> None:
    """NVRx hands write results over through one module-level queue (checked to exist in the installed
    NVRx); results of an abandoned save must not reach the next save's finalize."""
    from nvidia_resiliency_ext.checkpointing.async_ckpt import filesystem_async

    from training.checkpoint.nvrx_async import reset_write_results

    assert hasattr(filesystem_async, "_results_queue")
    stale: queue.Queue = queue.Queue()
    stale.put({"0": ["write results of an abandoned save"]})
    stale.put({"0": ["another"]})
    monkeypatch.setattr(filesystem_async, "_results_queue", stale)
    reset_write_results()
    assert stale.empty()
    assert filesystem_async._results_queue is None  # the next save creates a fresh one: late puts go nowhere
    reset_write_results()  # no queue yet: nothing to do


NVRX_ABANDON_SCRIPT = """
import gc, sys, time
import torch.distributed as dist
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=0, world_size=1)
from training.checkpoint.manager import abandon_async_saves
from training.checkpoint.nvrx_async import NvrxAsync
nvrx = NvrxAsync()  # real NVRx queue + spawned persistent worker (no CUDA needed until a save)
caller = nvrx.queue.persistent_caller
deadline = time.time() + 60
while not caller.process.is_alive() and time.time() < deadline:
    time.sleep(0.1)
worker = caller.process
# What an interrupted close(collective=False) leaves: the caller off the queue and its worker killed, but its
# ``process`` still set. NVRx's PersistentAsyncCaller.__del__ would then wait forever for the dead worker.
nvrx._dying.append(caller)
nvrx.queue.persistent_caller = None
worker.kill()
worker.join()
del caller
print("abandoned", abandon_async_saves(), flush=True)  # the in-process finalize hook finishes the job
del nvrx
gc.collect()
print("collected; worker alive:", worker.is_alive(), flush=True)
"""


def _run_nvrx_script(script: str, timeout_s: float, *, fresh: bool = False) -> str:
    """Run ``script`` (a one-rank gloo group on a free port) forked from the tests' worker template, or (``fresh``)
    in a fresh interpreter, which also ends as an interpreter does; return its stdout."""
    from tests.helpers.training_runs import forked_stdout, free_port, python_stdout

    if fresh:
        return python_stdout(["-c", script, str(free_port())], timeout_s)
    return forked_stdout("tests.helpers.script_runner", [script, str(free_port())], timeout_s)


def test_interrupted_abandon_is_completed_and_nothing_blocks_in_gc() -> None:
    """A fresh interpreter: its exit, after the collection, must not block on the killed writer either."""
    out = _run_nvrx_script(NVRX_ABANDON_SCRIPT, timeout_s=90, fresh=True)
    assert "abandoned 1" in out
    assert "collected; worker alive: False" in out


NVRX_REUSE_SCRIPT = """
import sys, tempfile, time
from pathlib import Path
import torch
import torch.distributed as dist
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=0, world_size=1)
from training.checkpoint import nvrx_async
from training.checkpoint.errors import CheckpointWriteError
from training.checkpoint.manager import abandon_async_saves
from training.checkpoint.nvrx_async import NvrxAsync


def drain(nvrx):  # finalize what finished, without the CUDA all_reduce NVRx uses across ranks
    nvrx.queue.maybe_finalize_async_calls(blocking=True, no_dist=True)

first = NvrxAsync()  # real NVRx queue; its warm-up request spawns the persistent worker
drain(first)
worker = first.queue.persistent_caller.process
abandon_async_saves()  # an in-process restart with nothing in flight: the idle writer is kept
print("parked", len(nvrx_async._SPARE_WORKER), worker.is_alive(), flush=True)
second = NvrxAsync()
print("reused", second.reused_worker, second.queue.persistent_caller.process.pid == worker.pid, flush=True)
drain(second)  # the reused writer serves requests (here its warm-up)
print("served", second.pending(), flush=True)
def busy(nvrx, seconds):  # a write that takes ``seconds``
    nvrx._schedule(nvrx._core.AsyncRequest(async_fn=time.sleep, async_fn_args=(seconds,), finalize_fns=[]))

busy(second, 1.5)  # a write in flight at the fault: the writer is kept, and owes the failed iteration that write
abandon_async_saves()
print("busy writer parked", worker.is_alive(), nvrx_async._SPARE_WORKER[0].stale, flush=True)
third = NvrxAsync()
print("reused busy", third.reused_worker, third.parked.stale, flush=True)
print("first poll done", third.finalize(blocking=False, no_dist=True), flush=True)  # the old write still runs
third.finalize(blocking=True, no_dist=True)  # its completion is taken off, then third's own warm-up finalized
print("settled", third.parked.stale, third.pending(), flush=True)
busy(third, 60)  # a write that outlives the next restart too: the writer is kept over one restart at most
abandon_async_saves()
fourth = NvrxAsync()
nvrx_async.STALE_WRITE_WAIT_S = 0.5
try:
    fourth.schedule({"w": torch.zeros(2)}, Path(tempfile.mkdtemp()), lambda: None)
except CheckpointWriteError as exc:
    print("save refused:", exc, flush=True)
abandon_async_saves()
worker.join(timeout=10)
print("stuck writer stopped", not worker.is_alive(), len(nvrx_async._SPARE_WORKER), flush=True)
third = NvrxAsync()
print("fresh", not third.reused_worker, flush=True)
drain(third)

# The save plan: a collective while NVRx's cache is unproven, none once two plans of one layout agreed; a new
# path (a restart) starts with an empty cache.
from nvidia_resiliency_ext.checkpointing.async_ckpt.filesystem_async import FileSystemWriterAsync
from torch.distributed.checkpoint.utils import _DistWrapper

collectives = []
plain_reduce_scatter = _DistWrapper.reduce_scatter
def counted(self, *args, **kwargs):
    collectives.append(1)
    return plain_reduce_scatter(self, *args, **kwargs)
_DistWrapper.reduce_scatter = counted
state = {"w": torch.arange(6.0).reshape(2, 3), "b": torch.zeros(4), "step": 7}
plans = []
for nvrx in (second, second, second, second, third):
    before = len(collectives)
    writer, _, _ = nvrx_async.plan_save(state, FileSystemWriterAsync(tempfile.mkdtemp()), nvrx.plan_cache)
    plans.append(len(collectives) - before)
print("plan collectives", *plans, flush=True)
third.close()
"""


def test_the_nvrx_writer_is_reused_after_an_abandon_once_it_finished_the_failed_iterations_requests() -> None:
    """An in-process restart keeps the persistent writer (a fresh one stalled the next save ~5 s on an H200): an
    idle one, and a busy one whose last request completes first, but not one still busy at the next restart; the
    save plan is cached per path."""
    lines = _run_nvrx_script(NVRX_REUSE_SCRIPT, timeout_s=120).splitlines()
    assert "parked 1 True" in lines
    assert "reused True True" in lines
    assert "served 0" in lines
    assert "busy writer parked True 1" in lines
    assert "reused busy True 1" in lines
    assert "first poll done False" in lines
    assert "settled 0 0" in lines
    assert (
        "save refused: the reused NVRx writer did not finish the writes of the iteration before the restart "
        "within 0.5 s" in lines
    )
    assert "stuck writer stopped True 0" in lines
    assert "fresh True" in lines
    # NVRx's enable_cache: the 1st and 2nd plans reduce-scatter (the 2nd proves the layout unchanged), the 3rd and
    # 4th reuse the plan; the next path's cache is empty again.
    assert "plan collectives 1 1 0 0 1" in lines


def test_nvrx_staging_modes_need_an_nvrx_that_has_them() -> None:
    """``checkpoint.nvrx_staging`` other than NVRx's default either configures NVRx (0.7+) or fails clearly."""
    import inspect

    from nvidia_resiliency_ext.checkpointing.async_ckpt import core

    from training.checkpoint.errors import CheckpointError
    from training.checkpoint.nvrx_async import NvrxAsync

    if "cpu_shm_mode" in inspect.signature(core.AsyncCallsQueue.__init__).parameters:
        nvrx = NvrxAsync("cpu-shm-cached")
        try:
            assert nvrx.queue.cpu_shm_mode
            assert nvrx._writer_kwargs == {
                "thread_count": 1,
                "use_cpu_shm_for_gpu_tensors": True,
                "use_cached_data_structure": True,
            }
        finally:
            nvrx.close(collective=False)
    else:
        with pytest.raises(CheckpointError, match=r"needs NVRx >= 0\.7"):
            NvrxAsync("cpu-shm")


NVRX_DEAD_WRITER_SCRIPT = """
import os, signal, sys, time
import torch.distributed as dist
dist.init_process_group("gloo", init_method="tcp://127.0.0.1:" + sys.argv[1], rank=0, world_size=1)
from training.checkpoint.errors import CheckpointWriteError
from training.checkpoint.nvrx_async import NvrxAsync

nvrx = NvrxAsync()  # real NVRx queue and persistent writer process
nvrx.finalize(blocking=True, no_dist=True)  # its warm-up request
print("warm", nvrx.pending(), flush=True)
nvrx._schedule(nvrx._core.AsyncRequest(async_fn=time.sleep, async_fn_args=(120,), finalize_fns=[]))
worker = nvrx.queue.persistent_caller.process
os.kill(worker.pid, signal.SIGKILL)  # the writer dies mid-write (the OOM killer, say)
try:
    nvrx.finalize(blocking=True, no_dist=True)
except CheckpointWriteError as exc:
    print("finalize raised:", exc, flush=True)
try:
    nvrx.close()  # NVRx's own close would wait for the dead writer too
except CheckpointWriteError:
    print("close raised; writer reaped", nvrx.queue.persistent_caller is None, flush=True)
"""


def test_a_dead_nvrx_writer_fails_the_wait_instead_of_hanging_it() -> None:
    """NVRx's blocking finalize polls its completion queue forever once the writer process is gone."""
    out = _run_nvrx_script(NVRX_DEAD_WRITER_SCRIPT, timeout_s=90)
    assert "warm 0" in out
    assert "finalize raised: the NVRx checkpoint writer process died (exit code -9)" in out
    assert "close raised; writer reaped True" in out


def test_a_failed_nvrx_write_reaches_the_ledger_from_the_per_step_poll(tmp_path: Path) -> None:
    """NVRx raises a failed write out of its finalize, which the trainer calls every step (maybe_finalize): it must
    come out as CheckpointWriteError naming the cause, with ckpt_failed, like the other save paths."""
    out = nvrx_saves.run(tmp_path, tmp_path / "ckpt", "dev-full")
    assert "maybe_finalize raised: checkpoint at step 1 failed: ENOSPC: No space left on device" in out
    assert "ckpt_failed: ['ENOSPC: No space left on device" in out


# A really full file system (a 512 KiB tmpfs) on the NVRx path, and the cause its message names: test_fault_matrix.py
# checks that on the fault matrix's run of it (test_a_full_disk_on_the_nvrx_path_names_its_cause_from_the_file_system).


def test_the_writer_warm_up_takes_the_device_tensors_a_save_copies_to_host() -> None:
    """Pinned buffers are warmed for device tensors only (a CPU tensor is written as it is), by their bytes."""
    import torch

    from training.checkpoint.nvrx_async import device_tensors

    state = {
        "app": {
            "model": {"w": torch.empty(4, 8, device="meta"), "b": torch.zeros(8)},  # float32: 128 bytes; CPU: none
            "optim": {"state": [torch.empty(3, dtype=torch.bfloat16, device="meta"), 1.5], "step": 7},  # 6 bytes
        }
    }
    assert [t.numel() * t.element_size() for t in device_tensors(state)] == [128, 6]


def test_the_writer_warm_up_is_sent_only_where_the_writer_copies_device_tensors() -> None:
    """``cpu-shm`` staging copies in the trainer, and a state without device tensors has nothing to pin: neither
    sends a request to the writer."""
    import torch

    from training.checkpoint.nvrx_async import NvrxAsync

    sent: list[object] = []
    nvrx = NvrxAsync.__new__(NvrxAsync)  # only the two attributes warm_host_memory reads
    nvrx._schedule = sent.append  # type: ignore[method-assign]
    nvrx.staging = "cpu-shm"
    assert nvrx.warm_host_memory({"w": torch.empty(4, device="meta")}) is False
    nvrx.staging = "cuda-ipc"
    assert nvrx.warm_host_memory({"w": torch.zeros(4)}) is False
    assert sent == []


def test_the_writer_lets_go_of_the_trainers_tensors_once_they_are_copied() -> None:
    """NVRx keeps a request until its write ends; the preload wrapper must drop what the copy read as soon as it
    returns, so a writer killed mid-write holds none of the trainer's (CUDA IPC) tensors."""
    import functools
    import gc
    import weakref

    import torch

    from training.checkpoint.errors import CheckpointError
    from training.checkpoint.nvrx_async import PreloadThenRelease

    shared = torch.arange(6.0)
    alive = weakref.ref(shared)
    preload = PreloadThenRelease(functools.partial(lambda t: t.clone() * 2, shared))
    del shared
    gc.collect()
    assert alive() is not None  # the request still holds it: the copy has not run
    copied = preload()
    assert copied.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    assert alive() is None  # released right after the copy, while the request lives on
    with pytest.raises(CheckpointError, match="ran twice"):
        preload()


def test_several_nvrx_writers_split_a_rank_into_files_that_commit_and_restore(tmp_path: Path) -> None:
    """``checkpoint.write_threads: 3``: NVRx forks 3 writers for the rank, one file each; the commit hashes them all
    and a restore brings the saved weights back."""
    out = nvrx_saves.run(tmp_path, tmp_path / "ckpt", "threads")
    assert "files: ['.metadata', 'COMMITTED', '__0_0.distcp', '__0_1.distcp', '__0_2.distcp']" in out
    assert "restored step 1 same weights True" in out


def test_a_save_handed_over_from_its_copy_commits_what_the_state_was_at_the_save(tmp_path: Path) -> None:
    """``cuda-copy`` staging: the writer gets the save copy and runs its preload inside its write (the request has
    no preload of its own to wait for); training goes on during the 0.5 s write, and the restore brings back the
    weights of the save's step."""
    from training.telemetry.events import read_events

    out = nvrx_saves.run(tmp_path, tmp_path / "ckpt", "copy").splitlines()
    assert "trained on during the write: True" in out
    assert "files: ['.metadata', 'COMMITTED', '__0_0.distcp']" in out
    assert "restored step 1 same weights True" in out
    (staged,) = [e for e in read_events(tmp_path) if e["event"] == "ckpt_staged"]
    assert staged["gpu_copy_s"] >= 0 and staged["backend"] == "nvrx.FileSystemWriterAsync (cuda-copy)"


def test_a_write_in_flight_at_an_in_process_restart_finishes_on_the_writer_the_next_iteration_reuses(
    tmp_path: Path,
) -> None:
    """A fresh writer stalled the first save after a restart ~5.5 s on an H200: the writer is kept even with a
    (here 0.5 s slow) write in flight; the next iteration's save of the same step waits for it, then commits."""
    out = nvrx_saves.run(tmp_path, tmp_path / "ckpt", "restart").splitlines()
    assert "writer kept True owes True" in out
    assert "restored before None" in out
    assert "files: ['.metadata', 'COMMITTED', '__0_0.distcp']" in out
    assert "restored step 1 same weights True" in out
    assert "stale wait [False, True]" in out  # the first iteration's save had nothing to wait for
    assert "writer alive True" in out


WARM_RESULTS_SCRIPT = """
import multiprocessing as mp
from training.checkpoint.nvrx_async import warm_results_manager
results = mp.get_context("spawn").Manager().Queue()  # as NVRx makes it: a proxy of a spawned manager process
results.put({3: ["a real write result"]})  # a save's, already there
thread = warm_results_manager(results)
thread.join(timeout=60)
print("warmed", thread.name, not thread.is_alive(), flush=True)
print("next taken", results.get(timeout=10), "then empty", results.empty(), flush=True)
print("no manager", warm_results_manager(mp.get_context("spawn").Queue()), flush=True)
"""


def test_the_results_manager_warm_up_leaves_the_results_queue_alone() -> None:
    """The trainer passes one DCP write result through a side queue of NVRx's results manager (which then imports DCP
    before the first save): a save's finalize, which takes the oldest entry of the results queue, finds its own."""
    lines = _run_nvrx_script(WARM_RESULTS_SCRIPT, timeout_s=60).splitlines()
    assert "warmed nvrx-results-warm-up True" in lines
    assert "next taken {3: ['a real write result']} then empty True" in lines
    assert "no manager None" in lines
