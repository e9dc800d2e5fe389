"""What page-locking the memory tier's host slots costs, and what it costs the training thread meanwhile.

The memory tier maps its two host slots in ``/dev/shm`` and page-locks them (``cudaHostRegister``) on a thread of
its own while training goes on. At 1B that is 2 x 11 GB. This benchmark times each way of doing it, and the step
time of a GPU loop on the main thread while it happens (a loop of many small kernels, as FSDP's step launches):

- ``fallocate+register``: reserve the file's pages (``posix_fallocate``), map, then one ``cudaHostRegister``;
- ``populate+register``: the same, with the mapping's page tables filled first by parallel threads
  (``MADV_POPULATE_WRITE``), so the register only locks pages that are already there;
- ``chunked``: ``cudaHostRegister`` in chunks of ``--chunk-mib`` (each chunk is its own registration);
- ``project``: what the memory tier does (:func:`training.checkpoint.hostbuf.buffer`: the page tables filled in
  64 MiB chunks by 8 threads, then one register).

Usage::

    python -m benchmarks.host_pinning --gib 11 --slots 2

It prints a table: the time to ready the slots, and the main loop's median step time before and while.
"""

from __future__ import annotations

import argparse
import ctypes
import mmap
import os
import statistics
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path

import torch

from training.checkpoint import hostbuf

MADV_POPULATE_WRITE = 23  # linux/mman.h, Linux >= 5.14
_LIBC = ctypes.CDLL(None, use_errno=True)


def _madvise(addr: int, length: int, advice: int) -> None:
    if _LIBC.madvise(ctypes.c_void_p(addr), ctypes.c_size_t(length), ctypes.c_int(advice)) != 0:
        raise OSError(ctypes.get_errno(), f"madvise({advice}) failed")


def _map(path: Path, nbytes: int) -> tuple[mmap.mmap, torch.Tensor]:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        os.ftruncate(fd, nbytes)
        os.posix_fallocate(fd, 0, nbytes)
        mm = mmap.mmap(fd, nbytes)
    finally:
        os.close(fd)
    return mm, torch.frombuffer(mm, dtype=torch.uint8)


def _register(t: torch.Tensor, offset: int = 0, length: int | None = None) -> None:
    length = t.numel() - offset if length is None else length
    err = torch.cuda.cudart().cudaHostRegister(t.data_ptr() + offset, length, 0)
    if int(err) != 0:
        raise OSError(f"cudaHostRegister failed: {err}")


def _populate(t: torch.Tensor, threads: int) -> None:
    n = t.numel()
    part = -(-n // threads)
    part += -part % mmap.PAGESIZE
    with ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda o: _madvise(t.data_ptr() + o, min(part, n - o), MADV_POPULATE_WRITE), range(0, n, part)))


def ready_slots(way: str, directory: Path, nbytes: int, slots: int, chunk: int, threads: int) -> dict[str, float]:
    """Map and page-lock ``slots`` files of ``nbytes`` in ``directory`` the given way; seconds per phase."""
    phases = {"map_s": 0.0, "populate_s": 0.0, "register_s": 0.0}
    if way == "project":
        t0 = time.perf_counter()
        for k in range(slots):
            hostbuf.buffer(directory / f"slot{k}.bin", nbytes)
        phases["register_s"] = time.perf_counter() - t0  # all phases together
        for k in range(slots):
            path = directory / f"slot{k}.bin"
            torch.cuda.cudart().cudaHostUnregister(hostbuf._MAPPED[path][1].data_ptr())
            hostbuf._MAPPED.pop(path)
            hostbuf._PINNED.discard(path)
        return phases
    keep = []
    for k in range(slots):
        t0 = time.perf_counter()
        mm, t = _map(directory / f"slot{k}.bin", nbytes)
        keep.append((mm, t))
        t1 = time.perf_counter()
        if way == "populate+register":
            _populate(t, threads)
        t2 = time.perf_counter()
        if way == "chunked":
            for off in range(0, nbytes, chunk):
                _register(t, off, min(chunk, nbytes - off))
        else:
            _register(t)
        t3 = time.perf_counter()
        phases["map_s"] += t1 - t0
        phases["populate_s"] += t2 - t1
        phases["register_s"] += t3 - t2
    for _, t in keep:
        if way == "chunked":
            for off in range(0, nbytes, chunk):
                torch.cuda.cudart().cudaHostUnregister(t.data_ptr() + off)
        else:
            torch.cuda.cudart().cudaHostUnregister(t.data_ptr())
    return phases


def _step(layers: list[torch.Tensor], x: torch.Tensor) -> None:
    for w in layers:
        x = torch.nn.functional.gelu(x @ w)
    torch.cuda.synchronize()


def main_loop_while(fn, layers: list[torch.Tensor], x: torch.Tensor) -> tuple[float, list[float], dict[str, float]]:
    """Run ``fn`` on a thread while the main thread steps; (seconds fn took, step times meanwhile, fn's phases)."""
    out: dict[str, float] = {}
    done = threading.Event()

    def work() -> None:
        out.update(fn())
        done.set()

    th = threading.Thread(target=work)
    t0 = time.perf_counter()
    th.start()
    steps = []
    while not done.is_set():
        s0 = time.perf_counter()
        _step(layers, x)
        steps.append(time.perf_counter() - s0)
    th.join()
    return time.perf_counter() - t0, steps, out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gib", type=float, default=11.0, help="bytes per slot, GiB (the 1B model's state: 11)")
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--chunk-mib", type=int, default=1024)
    p.add_argument("--threads", type=int, default=8, help="threads filling the page tables (populate+register)")
    p.add_argument("--ways", default="fallocate+register,populate+register,project")
    p.add_argument("--dir", default="/dev/shm")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("host_pinning: no CUDA here; page-locking is what this measures, nothing to do")
        return 2
    nbytes = int(a.gib * (1 << 30)) // mmap.PAGESIZE * mmap.PAGESIZE
    layers = [torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16) / 45 for _ in range(64)]
    x = torch.randn(1024, 2048, device="cuda", dtype=torch.bfloat16)
    for _ in range(5):
        _step(layers, x)
    base = []
    for _ in range(50):
        s0 = time.perf_counter()
        _step(layers, x)
        base.append(time.perf_counter() - s0)
    print(
        f"{torch.cuda.get_device_name()}; {a.slots} x {a.gib} GiB; main loop step alone p50 "
        f"{statistics.median(base) * 1e3:.2f} ms"
    )
    print(
        f"{'way':<20} {'ready s':>8} {'map s':>7} {'populate s':>10} {'register s':>10} {'steps':>6} "
        f"{'step p50 ms':>11} {'step max ms':>11} {'lost s':>7}"
    )
    for way in a.ways.split(","):
        with tempfile.TemporaryDirectory(dir=a.dir) as d:
            total, steps, ph = main_loop_while(
                partial(ready_slots, way, Path(d), nbytes, a.slots, a.chunk_mib << 20, a.threads), layers, x
            )
        lost = sum(steps) - len(steps) * statistics.median(base)
        print(
            f"{way:<20} {total:8.2f} {ph['map_s']:7.2f} {ph['populate_s']:10.2f} {ph['register_s']:10.2f} "
            f"{len(steps):6d} {statistics.median(steps) * 1e3:11.2f} {max(steps) * 1e3:11.1f} {lost:7.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
