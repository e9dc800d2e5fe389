"""tests.helpers.worker_exit in a real pytest-xdist session: the worker skips the interpreter's teardown, yet the
session's exit handlers run and a failed test still fails the run."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.helpers.training_runs import REPO_ROOT, child_env

TESTS = """
import atexit
from pathlib import Path

OUT = Path({out!r})


class FreedInTeardown:
    def __init__(self) -> None:
        # by the time the teardown frees this, it has cleared the module's globals and the builtins
        self.path, self.open = str(OUT / "teardown"), open

    def __del__(self) -> None:
        with self.open(self.path, "w") as f:
            f.write("ran")


KEPT = FreedInTeardown()  # a module global: freed only by the interpreter's teardown


def test_registers_an_exit_handler() -> None:
    atexit.register((OUT / "handler").write_text, "ran")


def test_fails() -> None:
    assert False
"""


def _session(tmp_path: Path, *plugin: str) -> subprocess.CompletedProcess[str]:
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "test_session.py").write_text(textwrap.dedent(TESTS.format(out=str(out))))
    cmd = [sys.executable, "-m", "pytest", "-q", "-n", "1", "-p", "no:cacheprovider", *plugin, str(tmp_path)]
    return subprocess.run(cmd, cwd=REPO_ROOT, env=child_env(), capture_output=True, text=True, timeout=120)


def test_the_worker_skips_the_teardown_but_runs_the_session_s_exit_handlers(tmp_path: Path) -> None:
    proc = _session(tmp_path, "-p", "tests.helpers.worker_exit")
    assert proc.returncode == 1 and "1 failed, 1 passed" in proc.stdout, proc.stdout + proc.stderr
    assert (tmp_path / "out" / "handler").read_text() == "ran"
    assert not (tmp_path / "out" / "teardown").exists()


def test_without_it_the_worker_tears_down(tmp_path: Path) -> None:
    """The other side of the check above: the module global is freed in a worker's ordinary teardown."""
    proc = _session(tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert (tmp_path / "out" / "teardown").read_text() == "ran"
