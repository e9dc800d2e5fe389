"""The launchers' torch-free CUDA probe agrees with torch on this machine and says 0 where no driver is loadable."""

from __future__ import annotations

import subprocess
import sys

from training.common.gpus import cuda_device_count


def test_the_probe_counts_what_torch_counts() -> None:
    import torch

    assert cuda_device_count() == torch.cuda.device_count()


def test_no_driver_library_means_no_devices() -> None:
    # A process whose loader cannot find libcuda.so.1 (an empty library path and no ldconfig cache entry are not
    # portable to arrange), so the missing-library branch is exercised by a ctypes that refuses every load.
    code = (
        "import ctypes\n"
        "def refuse(*a, **k):\n    raise OSError('libcuda.so.1: cannot open shared object file')\n"
        "ctypes.CDLL = refuse\n"
        "from training.common.gpus import cuda_device_count\nprint(cuda_device_count())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "0"
