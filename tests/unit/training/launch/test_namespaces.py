"""Joining another process's namespaces and root (root, ``unshare``), as a warm pod's template does."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.helpers.training_runs import REPO_ROOT
from training.launch import namespaces

#: Run after ``enter``: a fork (the PID namespace holds only children) that says where it is.
JOIN = """
import os, socket, sys
from training.launch import namespaces
print(sorted(namespaces.enter(int(sys.argv[1]))), flush=True)
child = os.fork()
if child == 0:
    print(os.getpid(), socket.gethostname(), open(sys.argv[2]).read(), os.getcwd(), flush=True)
    os._exit(0)
os.waitpid(child, 0)
"""


def test_nothing_differs_from_this_process_itself():
    assert namespaces.differing(os.getpid()) == []


def test_a_fork_after_entering_is_in_the_other_process_s_pid_uts_and_mount_namespaces_and_root(tmp_path):
    """The other process runs chrooted in a bind of / whose ``inner`` directory has a tmpfs of its own: its marker
    exists only in that mount namespace, under that root."""
    root, inner = tmp_path / "root", tmp_path / "inner"
    root.mkdir()
    inner.mkdir()
    setup = (
        f"mount --make-rprivate / && mount --rbind / {root} && mount -t tmpfs none {root}{inner} && "
        f"printf in-the-root > {root}{inner}/marker && hostname ns-test && cd {root} && exec chroot . /bin/sleep 60"
    )
    sleeper = subprocess.Popen(
        ["unshare", "--pid", "--uts", "--mount", "--fork", "--", "bash", "-c", setup], start_new_session=True
    )
    try:
        target = _sleep_child(sleeper.pid)
        assert sorted(namespaces.differing(target)) == ["mnt", "pid", "uts"]
        out = subprocess.run(
            [sys.executable, "-c", JOIN, str(target), str(inner / "marker")],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        sleeper.kill()
        sleeper.wait(timeout=10)
    joined, where = out.stdout.splitlines()
    assert joined == "['mnt', 'pid', 'uts']", out.stderr
    pid, rest = where.split(" ", 1)
    assert rest == "ns-test in-the-root /"
    assert 1 < int(pid) < 10  # numbered in the new namespace: the sleep is 1, the setup's four commands 2-5
    assert not (inner / "marker").exists()


def test_entering_a_process_that_is_gone_raises():
    with pytest.raises(FileNotFoundError):
        namespaces.enter(2**22 + 1)  # above the kernel's pid_max


def _sleep_child(unshare_pid: int) -> int:
    """The forked child of ``unshare`` (PID 1 of the new namespace), once it is the chrooted ``sleep``."""
    deadline = time.monotonic() + 10
    children = Path(f"/proc/{unshare_pid}/task/{unshare_pid}/children")
    while time.monotonic() < deadline:
        for pid in children.read_text().split():
            if Path(f"/proc/{pid}/cmdline").read_bytes().startswith(b"/bin/sleep"):
                return int(pid)
        time.sleep(0.02)
    raise AssertionError("unshare's child never became the sleep")
