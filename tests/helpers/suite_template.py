"""One worker template for the whole xdist run (a pytest plugin of the root conftest).

The controller starts it before its workers start, and names it to them in
:data:`~tests.helpers.training_runs.SUITE_TEMPLATE_ENV` (they inherit the controller's environment), so the training
code is imported once for the run rather than once per worker that starts a training run (about 4.4 busy CPU-s each
on the 2-core machine). A worker whose suite template no longer serves starts its own
(:func:`~tests.helpers.training_runs.shared_template`); a serial run has no controller and starts its own too.
"""

from __future__ import annotations

import os
import subprocess
from typing import Any

_STARTED: list[tuple[subprocess.Popen, str]] = []


def pytest_configure(config: Any) -> None:
    if hasattr(config, "workerinput") or not config.getoption("numprocesses", None):
        return  # a worker, or no xdist workers at all
    from tests.helpers.training_runs import SUITE_TEMPLATE_ENV, start_template

    path = f"/tmp/training-prefork-tests-suite-{os.getpid()}.sock"
    template = start_template(path)
    _STARTED.append((template, path))
    os.environ[SUITE_TEMPLATE_ENV] = f"{template.pid}:{path}"


def pytest_unconfigure(config: Any) -> None:
    from tests.helpers.training_runs import SUITE_TEMPLATE_ENV, stop_template

    while _STARTED:
        stop_template(*_STARTED.pop())  # its log is kept if it failed
    os.environ.pop(SUITE_TEMPLATE_ENV, None)
