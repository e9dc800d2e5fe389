"""The launchers' torch-free CUDA probe agrees with torch on this machine and says 0 where no driver is loadable."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from training.common.gpus import cuda_device_count, driver_library_dir, loaded_library_dir


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


#: Lines of a /proc/PID/maps: anonymous and bracketed mappings have no path, a path may hold spaces.
MAPS = """\
7f0a1c000000-7f0a1c021000 rw-p 00000000 00:00 0
7f0a1d200000-7f0a1d400000 r--p 00000000 08:01 1234 /usr/lib/x86_64-linux-gnu/libc.so.6
7f0a1e000000-7f0a1f000000 r-xp 00000000 08:01 5678 /opt/my drivers/lib64/libcuda.so.560.35.03
7f0a1f000000-7f0a1f100000 r--p 00100000 08:01 5678 /opt/my drivers/lib64/libcuda.so.560.35.03
7ffd5a1c0000-7ffd5a1e1000 rw-p 00000000 00:00 0                          [stack]
"""


def test_the_driver_directory_is_read_from_the_mapped_library() -> None:
    assert loaded_library_dir("libcuda.so", MAPS) == "/opt/my drivers/lib64"
    assert loaded_library_dir("libnvidia-ml.so", MAPS) is None


def test_no_driver_directory_without_a_driver() -> None:
    import torch

    assert (driver_library_dir() is None) == (not torch.cuda.is_available())


def test_a_library_loaded_from_a_directory_of_ours_is_found_there(tmp_path: Path) -> None:
    """This process's own maps: a shared object (a copy of the interpreter's ``_json`` extension) loaded from a
    directory with a space in its name."""
    import _json
    import ctypes
    import shutil

    lib_dir = tmp_path / "my drivers"
    lib_dir.mkdir()
    shutil.copy(_json.__file__, lib_dir / "libjsoncopy.so.1")
    ctypes.CDLL(str(lib_dir / "libjsoncopy.so.1"))
    assert loaded_library_dir("libjsoncopy.so", Path("/proc/self/maps").read_text()) == str(lib_dir)
