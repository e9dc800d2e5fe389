"""NVRx's async checkpoint path on CPU tensors, for tests on machines without CUDA.

Everything is NVRx's own: the persistent ``AsyncCallsQueue`` and its spawned writer process, ``FileSystemWriterAsync``
and ``save_state_dict_async_plan`` / ``_finalize``. Left out are the two calls that need CUDA: the D2H preload of
GPU tensors (the tensors are on the CPU already) and NVRx's completion all_reduce on a CUDA tensor (``no_dist``).
Tensors reach the writer through shared memory, not a copy: fine for the error paths these tests drive. With
``cuda-copy`` staging the preload runs in the writer (inside its write): there it is NVRx's own, minus the device
synchronize of a non-blocking copy.
"""

from __future__ import annotations

import functools
from typing import Any

from training.checkpoint.nvrx_async import NvrxAsync, PreloadThenRelease
from training.checkpoint.save_copy import PreloadThenWrite


class CpuNvrx(NvrxAsync):
    """:class:`NvrxAsync` minus its CUDA calls (see the module docstring)."""

    def _schedule(self, request: Any) -> None:
        if "preload_fn" in request._fields:
            request = request._replace(preload_fn=None)
        if isinstance(request.async_fn, PreloadThenWrite):  # NVRx's partial(preload_tensors, data, non_blocking)
            preload = request.async_fn.preload.preload
            request.async_fn.preload = PreloadThenRelease(functools.partial(preload.func, preload.args[0], False))
        super()._schedule(request)

    def finalize(self, blocking: bool, *, no_dist: bool = False, **kwargs: Any) -> bool:
        return super().finalize(blocking, no_dist=True, **kwargs)
