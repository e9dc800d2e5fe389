"""A cheaper ``get_method_name`` for the elastic rendezvous of torch and NVRx (one rough edge, mended in one place).

Every rendezvous event that torch's c10d rendezvous and NVRx's copies of it record (each join, each state sync and
each keep-alive, every few seconds for the launcher's whole life) first names its method with
``get_method_name()``, which calls ``inspect.stack()`` twice. That builds a ``FrameInfo`` with source context for
every frame, and ``inspect.getmodule`` scans all of ``sys.modules`` for each frame whose file it has not cached
(``<frozen runpy>`` never is). In a launcher forked from the worker template (``training.launch.prefork``), with
torch's thousands of modules loaded, that was 83% of the launcher's CPU in a 40-step local run (py-spy, 2026-12-03).

:func:`cheapen` replaces each module's ``get_method_name`` with one that reads the same frame's name from
``sys._getframe``: the same string for the same call, without the scan. It imports nothing at its own import (this
module stays free of torch) and names the modules it changed. The template calls it after its imports, loading those
of the four that the installed versions have; a launcher started cold keeps the library's own function.
"""

from __future__ import annotations

import importlib
import sys

#: The modules that define ``get_method_name(depth=2)`` as ``inspect.stack()[depth].function``: torch's c10d
#: rendezvous (torchrun), NVRx 0.4.1's rendezvous and its copy of torch's, NVRx 0.7.0's barrier rendezvous (0.7.0
#: has neither of 0.4.1's).
MODULES = (
    "torch.distributed.elastic.rendezvous.dynamic_rendezvous",
    "nvidia_resiliency_ext.fault_tolerance._ft_rendezvous",
    "nvidia_resiliency_ext.fault_tolerance._torch_elastic_compat.rendezvous.dynamic_rendezvous",
    "nvidia_resiliency_ext.fault_tolerance.ft_rendezvous_barrier",
)


def get_method_name(depth: int = 2) -> str:
    """The name of the function ``depth`` frames up from this one (``inspect.stack()[depth].function``)."""
    try:
        return sys._getframe(depth).f_code.co_name
    except ValueError:  # the stack is not that deep
        return "no_method_name"


def cheapen(modules: tuple[str, ...] = MODULES, *, load: bool = False) -> list[str]:
    """Give each of ``modules`` that has a ``get_method_name`` this module's; the names changed. Only modules already
    imported, unless ``load``: then each one of an imported package (torch, NVRx) is imported first if this
    installation has it (a launcher imports its rendezvous only when it starts one, after the template forked it)."""
    changed = []
    for name in modules:
        if load and name not in sys.modules and name.split(".")[0] in sys.modules:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError:  # not in this NVRx version (0.4.1 has no barrier rendezvous, 0.7.0 only it)
                continue
        module = sys.modules.get(name)
        if module is not None and callable(getattr(module, "get_method_name", None)):
            module.get_method_name = get_method_name
            changed.append(name)
    return changed
