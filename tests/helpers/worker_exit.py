"""An xdist worker ends without the interpreter's teardown (``tests/conftest.py`` uses this plugin's hook).

Once a worker's session is over, freeing what its tests loaded (torch, the jsii kernels' objects, every test module)
kept the controller waiting (two files on one worker: their last test's end to pytest's exit 3.86 -> 1.84 s). The exit
handlers registered during the session still run (the shared worker template's stop, jsii's kernel stop,
multiprocessing's), because this one, registered at configure time, runs after them; logging is shut down and the
standard streams flushed before the process ends with ``os._exit(0)``. The run's result is the controller's, from
the reports the worker sent, not this exit status.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import sys
from typing import Any


def pytest_configure(config: Any) -> None:
    # xdist gives a worker's config its ``workerinput``; the environment's PYTEST_XDIST_WORKER is no test: a pytest
    # started by a worker's test inherits it, and ending that one with 0 would hide its failures
    if hasattr(config, "workerinput"):
        atexit.register(_exit_now)  # atexit runs its handlers last-registered first: this one after the session's


def _exit_now() -> None:
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a closed or broken stream has nothing left to keep
            stream.flush()
    os._exit(0)
