"""Is the first NVRx save's stall the pinned host allocation? Time D2H of ~300 tensors (5.85 GB) in a fresh process.

GPU call 6 of session 7 ran this as ``python3 .gpu/firstcopy.py cold`` and ``... prewarm`` (reformatted for ruff
since; the logic is unchanged).
"""

import sys
import time

import torch

mode = sys.argv[1]
torch.cuda.init()
torch.empty(1, device="cuda")
# 1B-like shard layout per rank: 300 tensors, 200 big and 100 small (about 5.85 GB of fp32 in all).
big = 5.85e9 / 4 / 200
sizes = [int(big)] * 200 + [4096] * 100
ts = [torch.randn(n, device="cuda") for n in sizes]
torch.cuda.synchronize()
if mode == "prewarm":
    t = time.perf_counter()
    bufs = [torch.empty(n * 4, dtype=torch.uint8, pin_memory=True) for n in sizes]
    del bufs
    print(f"prewarm pinned alloc {time.perf_counter() - t:.3f} s", flush=True)
for i in range(3):
    t = time.perf_counter()
    out = [x.to("cpu", non_blocking=True) for x in ts]
    torch.cuda.synchronize()
    dt = time.perf_counter() - t
    gbps = sum(o.numel() * 4 for o in out) / dt / 1e9
    print(f"{mode} copy {i}: {dt:.3f} s  {gbps:.1f} GB/s pinned={out[0].is_pinned()}", flush=True)
    del out
