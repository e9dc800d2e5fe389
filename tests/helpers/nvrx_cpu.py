"""NVRx's async checkpoint path on CPU tensors, for tests on machines without CUDA.

Everything is NVRx's own: the persistent ``AsyncCallsQueue`` and its spawned writer process, ``FileSystemWriterAsync``
and ``save_state_dict_async_plan`` / ``_finalize``. Left out are the two calls that need CUDA: the D2H preload of
GPU tensors (the tensors are on the CPU already) and NVRx's completion all_reduce on a CUDA tensor (``no_dist``).
Tensors reach the writer through shared memory, not a copy: fine for the error paths these tests drive.
"""

from __future__ import annotations

from typing import Any

from training.checkpoint.nvrx_async import NvrxAsync


class CpuNvrx(NvrxAsync):
    """:class:`NvrxAsync` minus its CUDA calls (see the module docstring)."""

    def _schedule(self, request: Any) -> None:
        if "preload_fn" in request._fields:
            request = request._replace(preload_fn=None)
        super()._schedule(request)

    def finalize(self, blocking: bool, *, no_dist: bool = False, **kwargs: Any) -> bool:
        return super().finalize(blocking, no_dist=True, **kwargs)
