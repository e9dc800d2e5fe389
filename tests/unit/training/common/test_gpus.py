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


def test_the_directory_of_a_loaded_library_is_where_the_loader_mapped_it_from(tmp_path: Path) -> None:
    """A shared object (a copy of the interpreter's ``_json`` extension) loaded from a directory of ours, a space in
    its name, is found there; a name not loaded is not."""
    import _json
    import ctypes
    import shutil

    lib_dir = tmp_path / "my drivers"
    lib_dir.mkdir()
    copy = lib_dir / "libjsoncopy.so.1"
    shutil.copy(_json.__file__, copy)
    ctypes.CDLL(str(copy))
    assert loaded_library_dir("libjsoncopy.so") == str(lib_dir)
    assert loaded_library_dir("libnot-loaded-here.so") is None


def test_no_driver_directory_without_a_driver() -> None:
    import torch

    assert (driver_library_dir() is None) == (not torch.cuda.is_available())
