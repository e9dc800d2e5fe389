"""Test-only stand-in for torch's c10d rendezvous module: imported by a template (``--warm``), it registers itself
under the real module's name with the library's own ``get_method_name``, so a test can see the template replace it
without importing torch."""

from __future__ import annotations

import inspect
import sys

from training.launch.rendezvous_names import MODULES


def get_method_name(depth: int = 2) -> str:  # the library's code, as torch 2.13 and NVRx 0.4.1/0.7.0 have it
    if len(inspect.stack()) > depth:
        return inspect.stack()[depth].function
    return "no_method_name"


sys.modules[MODULES[0]] = sys.modules[__name__]
