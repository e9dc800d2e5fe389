"""What page-locking the memory tier's host slots costs, and what it costs the training thread meanwhile.

The memory tier maps its two host slots in ``/dev/shm`` and page-locks them (``cudaHostRegister``) on a thread of
its own while training goes on: 2 x 11 GiB at 1B. This benchmark readies the slots in each way below on a thread
while the main thread runs a GPU loop of many small kernels (as FSDP's step launches), and splits the loop's lost
time over the phases it overlapped:

- ``fallocate+register``: reserve the file's pages (``posix_fallocate``), map, then one ``cudaHostRegister`` (which
  faults the pages into the mapping itself);
- ``populate+register``: map, fill the page tables (``MADV_POPULATE_WRITE``, 64 MiB chunks on ``--threads``
  threads), then one register;
- ``project``: what the memory tier does (:func:`training.checkpoint.pinning.pin`): populate, then register in pieces
  of ``--piece-mib`` with ``--gap-ms`` between them. It also times a 256 MiB copy from the GPU inside one piece and
  across two through :func:`training.checkpoint.pinning.copy` (a single copy across two registrations fails with
  ``cudaErrorInvalidValue``).

Usage::

    python -m benchmarks.host_pinning --gib 11 --slots 2

It prints a table: per way and phase, the seconds it took, the main loop's time lost meanwhile, and its longest step.
"""

from __future__ import annotations

import argparse
import mmap
import statistics
import tempfile
import threading
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import torch

from training.checkpoint import hostbuf, pinning

Window = tuple[str, float, float]  # (phase, start, end), perf_counter seconds


def ready_slots(way: str, directory: Path, nbytes: int, slots: int, threads: int) -> list[Window]:
    """Map and page-lock ``slots`` files of ``nbytes`` in ``directory`` the given way, then release them; the
    phases' windows."""
    windows: list[Window] = []
    pinning.POPULATE_THREADS = threads

    def phase(name: str, fn: Callable[..., object], *args: object, **kwargs: object) -> object:
        t0 = time.perf_counter()
        out = fn(*args, **kwargs)
        windows.append((name, t0, time.perf_counter()))
        return out

    tensors: list[torch.Tensor] = []
    for k in range(slots):
        t = phase("map", hostbuf.buffer, directory / f"slot{k}.bin", nbytes, pin=False)
        assert isinstance(t, torch.Tensor)
        tensors.append(t)
        if way == "project":
            times = pinning.pin(t)
            end = time.perf_counter()
            windows.append(("populate", end - times.register_s - times.populate_s, end - times.register_s))
            windows.append(("register", end - times.register_s, end))
            continue
        if way == "populate+register":
            phase("populate", pinning.populate, t)
        phase("register", pinning.register, t.data_ptr(), t.numel())
    if way == "project" and nbytes > 2 * pinning.PIN_PIECE:
        gpu = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
        for name, off in (("copy-inside", 0), ("copy-across", pinning.PIN_PIECE - (128 << 20))):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            pinning.copy(tensors[0][off : off + gpu.numel()], gpu, non_blocking=True)
            torch.cuda.synchronize()
            windows.append((name, t0, time.perf_counter()))
    for t in tensors:
        for off in range(0, nbytes, pinning.PIN_PIECE) if way == "project" else (0,):
            torch.cuda.cudart().cudaHostUnregister(t.data_ptr() + off)
    for path in [p for p in hostbuf._MAPPED if p.parent == directory]:
        hostbuf._MAPPED.pop(path)
    pinning._PIECES.clear()
    return windows


def _step(layers: list[torch.Tensor], x: torch.Tensor) -> None:
    for w in layers:
        x = torch.nn.functional.gelu(x @ w)
    torch.cuda.synchronize()


def main_loop_while(
    fn: Callable[[], list[Window]], layers: list[torch.Tensor], x: torch.Tensor
) -> tuple[list[Window], list[Window]]:
    """Run ``fn`` on a thread while the main thread steps: (fn's phase windows, the steps' windows)."""
    out: list[Window] = []
    done = threading.Event()

    def work() -> None:
        try:
            out.extend(fn())
        finally:
            done.set()

    th = threading.Thread(target=work)
    th.start()
    steps: list[Window] = []
    while not done.is_set():
        s0 = time.perf_counter()
        _step(layers, x)
        steps.append(("step", s0, time.perf_counter()))
    th.join()
    return out, steps


def lost_by_phase(phases: list[Window], steps: list[Window], typical: float) -> dict[str, float]:
    """Each step's time above ``typical``, split over the phases it overlapped (by overlap), summed per phase."""
    lost: dict[str, float] = {}
    for _, s0, s1 in steps:
        overlaps = [(name, min(s1, p1) - max(s0, p0)) for name, p0, p1 in phases if min(s1, p1) > max(s0, p0)]
        total = sum(o for _, o in overlaps)
        for name, o in overlaps:
            lost[name] = lost.get(name, 0.0) + ((s1 - s0) - typical) * o / total
    return lost


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--gib", type=float, default=11.0, help="bytes per slot, GiB (the 1B model's state: 11)")
    p.add_argument("--slots", type=int, default=2)
    p.add_argument("--piece-mib", type=int, default=pinning.PIN_PIECE >> 20, help="bytes one register page-locks")
    p.add_argument("--gap-ms", type=float, default=pinning.PIN_GAP_S * 1e3, help="pause between two registers")
    p.add_argument("--threads", type=int, default=pinning.POPULATE_THREADS, help="threads filling the page tables")
    p.add_argument("--ways", default="fallocate+register,populate+register,project")
    p.add_argument("--dir", default="/dev/shm")
    a = p.parse_args(argv)
    if not torch.cuda.is_available():
        print("host_pinning: no CUDA here; page-locking is what this measures, nothing to do")
        return 2
    pinning.PIN_PIECE, pinning.PIN_GAP_S = a.piece_mib << 20, a.gap_ms / 1e3
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
    typical = statistics.median(base)
    print(f"{torch.cuda.get_device_name()}; {a.slots} x {a.gib} GiB; main loop step alone p50 {typical * 1e3:.2f} ms")
    print(f"{'way':<20} {'phase':<14} {'s':>7} {'loop lost s':>11} {'longest step s':>14}")
    for way in a.ways.split(","):
        with tempfile.TemporaryDirectory(dir=a.dir) as d:
            phases, steps = main_loop_while(partial(ready_slots, way, Path(d), nbytes, a.slots, a.threads), layers, x)
        lost = lost_by_phase(phases, steps, typical)
        for name in dict.fromkeys(n for n, _, _ in phases):
            took = sum(p1 - p0 for n, p0, p1 in phases if n == name)
            during = [s1 - s0 for _, s0, s1 in steps if any(n == name and s1 > p0 and s0 < p1 for n, p0, p1 in phases)]
            print(f"{way:<20} {name:<14} {took:7.3f} {lost.get(name, 0.0):11.2f} {max(during, default=0.0):14.3f}")
        print(f"{way:<20} {'all':<14} {steps[-1][2] - steps[0][1]:7.3f} {sum(lost.values()):11.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
