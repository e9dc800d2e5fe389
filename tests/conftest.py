"""Suite-wide hooks: with ``--dist loadfile`` (``make test``), files that share session fixtures run in one xdist
worker (:mod:`tests.helpers.xdist_scopes`), and a worker ends without the interpreter's teardown
(:mod:`tests.helpers.worker_exit`). The platform's session syntheses are fixtures of
:mod:`tests.helpers.stack_synth`; the workers' training runs fork from one worker template
(:mod:`tests.helpers.suite_template`)."""

from __future__ import annotations

from typing import Any

from tests.helpers.worker_exit import pytest_configure  # noqa: F401 (the hook, found by its name here)
from tests.helpers.xdist_scopes import make_scheduler

pytest_plugins = ["tests.helpers.stack_synth", "tests.helpers.suite_template"]


def pytest_xdist_make_scheduler(config: Any, log: Any) -> Any:
    return make_scheduler(config, log) if config.getvalue("dist") == "loadfile" else None
