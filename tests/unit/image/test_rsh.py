"""image/rsh.py: Open MPI's remote-shell agent between the preflight pods, run over real sockets and processes."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

RSH_PATH = Path(__file__).resolve().parents[3] / "image" / "rsh.py"
spec = importlib.util.spec_from_file_location("image_rsh", RSH_PATH)
rsh = importlib.util.module_from_spec(spec)
sys.modules["image_rsh"] = rsh
spec.loader.exec_module(rsh)  # type: ignore[union-attr]

TOKEN = "s3cret-token"


@pytest.fixture(scope="module")
def server():
    os.environ["RSH_TOKEN"] = TOKEN
    srv = rsh.Server(0, host="127.0.0.1")
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    yield srv.server_address[1]
    srv.shutdown()
    srv.server_close()
    del os.environ["RSH_TOKEN"]


def client(port: int, *args: str, token: str = TOKEN) -> subprocess.CompletedProcess:
    """The agent as Open MPI runs it: ``rsh.py <host> <command words>``, a separate process."""
    env = {**os.environ, "RSH_TOKEN": token, "RSH_PORT": str(port)}
    return subprocess.run([sys.executable, str(RSH_PATH), *args], capture_output=True, timeout=60, env=env)


def test_runs_the_command_through_the_shell_and_returns_its_output_and_status(server: int) -> None:
    done = client(server, "127.0.0.1", "echo", "$((6*7));", "printf", "'%s'", "to-stderr", ">&2;", "exit", "3")
    assert done.returncode == 3
    assert done.stdout == b"42\nto-stderr"  # stderr is merged, in order


def test_agent_options_before_the_host_are_skipped(server: int) -> None:
    done = client(server, "-x", "127.0.0.1", "true")
    assert (done.returncode, done.stdout) == (0, b"")


def test_a_wrong_token_runs_nothing(server: int, tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    done = client(server, "127.0.0.1", "touch", str(marker), token="guess")
    assert done.returncode == rsh.REFUSED == 255
    assert b"refused" in done.stdout and not marker.exists()


def test_an_unreachable_host_fails_with_255(tmp_path: Path) -> None:
    done = client(1, "127.0.0.1", "true")
    assert done.returncode == 255 and b"cannot reach 127.0.0.1" in done.stderr
