"""How many CUDA devices this process can use, without importing torch (1.4 CPU-s): the launchers only need the
count to pick timeouts and to say when they run the CPU fallback.

Asks the CUDA driver API directly (``cuInit`` + ``cuDeviceGetCount`` from ``libcuda.so.1``), which is what
``torch.cuda.device_count()`` ends up asking, ``CUDA_VISIBLE_DEVICES`` included. No driver library, or a driver
that fails to initialise, means no devices, as ``torch.cuda.is_available()`` says then.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

CUDA_SUCCESS = 0


def cuda_device_count() -> int:
    """The number of CUDA devices visible to this process; 0 without a working NVIDIA driver."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    if lib.cuInit(0) != CUDA_SUCCESS:
        return 0
    count = ctypes.c_int(0)
    if lib.cuDeviceGetCount(ctypes.byref(count)) != CUDA_SUCCESS:
        return 0
    return count.value


def driver_library_dir() -> str | None:
    """The directory of the NVIDIA driver's ``libcuda.so.1`` as this process loads it (None without one): what the
    NVIDIA container toolkit makes visible to a GPU container, and what a local pod's own library path lacks."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    return loaded_library_dir("libcuda.so", Path("/proc/self/maps").read_text())


def loaded_library_dir(prefix: str, maps: str) -> str | None:
    """The directory of the first mapped file whose name starts with ``prefix`` in ``maps`` (``/proc/PID/maps``)."""
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and Path(fields[5]).name.startswith(prefix):
            return str(Path(fields[5]).parent)
    return None
