"""The worker template (:mod:`training.launch.prefork`) with real processes, sockets and signals: a stand-in's
worker is a fork of the template that ends as a cold ``python -m`` would, and never outlives its stand-in."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.helpers.training_runs import REPO_ROOT, child_env

PAYLOAD = "tests.helpers.prefork_payload"


def _template(sock: Path, *warm: str) -> subprocess.Popen:
    """A template importing ``warm`` (stdlib-only modules here, so it is ready at once); waits until it is."""
    argv = [sys.executable, "-m", "training.launch.prefork", "serve", "--socket", str(sock)]
    for module in warm or ("json",):
        argv += ["--warm", module]
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith(f"[prefork] template {proc.pid} ready at {sock}"), line
    return proc


@pytest.fixture
def template(tmp_path: Path) -> Iterator[tuple[subprocess.Popen, Path]]:
    sock = tmp_path / "t.sock"
    proc = _template(sock)
    yield proc, sock
    proc.terminate()
    proc.wait(timeout=10)


def _stand_in(
    sock: Path | None, *args: str, cwd: Path, env_vars: dict[str, str] | None = None, **popen: object
) -> subprocess.Popen:
    env = {**child_env(), "PAYLOAD_ENV": "from-the-stand-in", **(env_vars or {})}
    if sock is not None:
        env["TRAINING_PREFORK_SOCKET"] = str(sock)
    argv = [sys.executable, "-m", "training.launch.prefork", "run", PAYLOAD, *args]
    return subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)


def test_the_worker_is_a_fork_of_the_template_with_the_stand_ins_argv_env_cwd_and_exit_code(template, tmp_path):
    proc, sock = template
    stand_in = _stand_in(sock, "exit", "7", cwd=tmp_path)
    out, err = stand_in.communicate(timeout=30)
    assert stand_in.returncode == 7
    assert f"ppid={proc.pid} argv=['exit', '7'] env=from-the-stand-in" in out  # forked by the template
    assert f"payload pid={stand_in.pid} " not in out
    assert f"payload cwd={tmp_path} launcher={stand_in.pid}" in out  # what the worker's events name
    assert "cold start" not in err


def test_a_worker_killed_by_a_signal_ends_its_stand_in_by_the_same_signal(template, tmp_path):
    _, sock = template
    stand_in = _stand_in(sock, "kill", str(int(signal.SIGKILL)), cwd=tmp_path)
    stand_in.communicate(timeout=30)
    assert stand_in.returncode == -signal.SIGKILL  # what the launcher sees of an OOM-killed worker


def test_sigterm_to_the_stand_in_reaches_the_worker(template, tmp_path):
    _, sock = template
    stand_in = _stand_in(sock, "term", cwd=tmp_path)
    assert stand_in.stdout is not None
    while "payload waiting" not in stand_in.stdout.readline():
        pass
    stand_in.send_signal(signal.SIGTERM)
    out, _ = stand_in.communicate(timeout=30)
    assert "payload got SIGTERM" in out
    assert stand_in.returncode == 143


def _answer_later(tmp_path: Path) -> tuple[subprocess.Popen, socket.socket]:
    """A stand-in whose template is played here, on the protocol's own framing, so that the window between its
    request and the answer stays open: the stand-in and the accepted connection, the request read."""
    from training.launch.prefork import _recv_json

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "peer.sock"))
    listener.listen(1)
    stand_in = _stand_in(tmp_path / "peer.sock", "term", cwd=tmp_path)
    conn, _ = listener.accept()
    listener.close()
    request, fds = _recv_json(conn, max_fds=3)
    for fd in fds:
        os.close(fd)
    assert request["module"] == PAYLOAD
    return stand_in, conn


def test_a_signal_before_the_template_answers_reaches_the_worker_once_it_does(tmp_path):
    """The worker may print before the template's answer names it (it writes to the stand-in's own streams), so a
    launcher's SIGTERM can come in between (seen once on three loaded xdist workers): the stand-in keeps it and
    sends it to the worker's group once it knows it, then ends as the worker did."""
    from training.launch.prefork import _send_json

    stand_in, conn = _answer_later(tmp_path)
    worker = subprocess.Popen(["sleep", "60"], start_new_session=True)  # a group of its own, as a forked worker's
    try:
        stand_in.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):  # not ended by it: the signal is held for the worker
            stand_in.wait(timeout=2)
        _send_json(conn, {"pid": worker.pid})
        assert worker.wait(timeout=10) == -signal.SIGTERM
        _send_json(conn, {"status": signal.SIGTERM})  # the wait status of a process killed by SIGTERM
        assert stand_in.wait(timeout=10) == -signal.SIGTERM
    finally:
        worker.kill()
        stand_in.kill()
        conn.close()


def test_a_signal_before_a_refusal_ends_the_stand_in_instead_of_a_cold_start(tmp_path):
    """Refused after a SIGTERM came, the stand-in ends by it rather than starting the worker cold."""
    from training.launch.prefork import _send_json

    stand_in, conn = _answer_later(tmp_path)
    try:
        stand_in.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):
            stand_in.wait(timeout=2)
        _send_json(conn, {"error": "refused for the test"})
        out, err = stand_in.communicate(timeout=30)
        assert stand_in.returncode == -signal.SIGTERM
        assert "payload" not in out  # no worker ran
        assert "cold start" not in err
    finally:
        stand_in.kill()
        conn.close()


def test_the_worker_dies_with_its_stand_in(template, tmp_path):
    """The launcher SIGKILLs a worker's process group: the stand-in dies, and its forked worker must follow."""
    _, sock = template
    pidfile = tmp_path / "worker.pid"
    stand_in = _stand_in(sock, "sleep", str(pidfile), cwd=tmp_path)
    deadline = time.monotonic() + 30
    while not pidfile.exists() or not pidfile.read_text():
        assert time.monotonic() < deadline, "the worker never started"
        time.sleep(0.05)
    worker = int(pidfile.read_text())
    stand_in.kill()
    stand_in.wait(timeout=10)
    deadline = time.monotonic() + 10
    while Path(f"/proc/{worker}").exists() and "zombie" not in _state(worker):
        assert time.monotonic() < deadline, f"worker {worker} outlived its stand-in"
        time.sleep(0.05)


def test_a_worker_removes_the_temporary_directory_multiprocessing_made_for_it(template, tmp_path):
    """A forked worker ends with ``os._exit``, which skips the interpreter's exit: multiprocessing's ``pymp-*``
    directory (a listener's socket, NVRx's checkpoint writer's) is removed as a fresh process's exit removes it."""
    _, sock = template
    with tempfile.TemporaryDirectory(prefix="prefork-") as tmp:  # short: the listener's socket path fits 107 bytes
        stand_in = _stand_in(sock, "mp-listener", cwd=tmp_path, env_vars={"TMPDIR": tmp})
        out, err = stand_in.communicate(timeout=30)
        assert stand_in.returncode == 0, err
        (address,) = [line.split("=", 1)[1] for line in out.splitlines() if line.startswith("payload listener=")]
        assert Path(address).parent.parent == Path(tmp) and Path(address).parent.name.startswith("pymp-")
        assert list(Path(tmp).iterdir()) == []


def test_what_a_worker_left_running_ends_with_it(template, tmp_path):
    """A worker's own children (NVRx's checkpoint writer, its monitor) are in its process group, which the stand-in
    kills when the worker ends, as the launcher kills a cold worker's group."""
    _, sock = template
    pidfile = tmp_path / "grandchild.pid"
    stand_in = _stand_in(sock, "spawn", str(pidfile), cwd=tmp_path)
    stand_in.communicate(timeout=30)
    assert stand_in.returncode == 0
    grandchild = int(pidfile.read_text())
    deadline = time.monotonic() + 10
    while Path(f"/proc/{grandchild}").exists() and "zombie" not in _state(grandchild):
        assert time.monotonic() < deadline, f"the worker's child {grandchild} outlived it"
        time.sleep(0.05)


def _spawned(out: str) -> tuple[int, int, int]:
    """The payload's ``mp-spawn`` report: the spawned child's pid, its parent's, and its exit code."""
    said = re.search(r"payload spawned pid=(\d+) ppid=(\d+) via=manager\n", out)
    code = re.search(r"payload spawned exitcode=(-?\d+)\n", out)
    assert said and code, out
    return int(said[1]), int(said[2]), int(code[1])


@pytest.mark.parametrize("code", [5, -signal.SIGKILL])
def test_a_workers_spawned_child_is_forked_by_the_template_with_its_queues_and_ends_as_it_ended(
    template, tmp_path, code
):
    """multiprocessing's ``spawn`` in a forked worker (NVRx's checkpoint writer and its manager) goes to the
    template too: the child is the template's fork, its queue's pipes and its manager's queue work, and the worker
    sees its exit code, or the signal that killed it (how NVRx tells a dead writer)."""
    proc, sock = template
    stand_in = _stand_in(sock, "mp-spawn", str(code), cwd=tmp_path)
    out, err = stand_in.communicate(timeout=60)
    assert stand_in.returncode == 0, err
    _, parent, exit_code = _spawned(out)
    assert (parent, exit_code) == (proc.pid, code)
    assert "cold start" not in err


def test_a_spawned_child_that_the_template_refuses_starts_cold_and_says_so(template, tmp_path):
    _, sock = template
    refusing = tmp_path / "threaded.sock"
    proc = _template(refusing, "tests.helpers.prefork_thread")
    try:
        stand_in = _stand_in(sock, "mp-spawn", "3", str(refusing), cwd=tmp_path)
        out, err = stand_in.communicate(timeout=60)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert stand_in.returncode == 0, err
    worker = int(re.search(r"payload pid=(\d+) ", out)[1])  # type: ignore[index]
    assert _spawned(out)[1:] == (worker, 3)  # its stand-in became the child (exec), as multiprocessing starts one
    refused = f"[prefork] cold start of a multiprocessing spawn child: the template at {refusing} refused: 2 threads"
    assert refused in err


def _state(pid: int) -> str:
    try:
        return next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("State:"))
    except (OSError, StopIteration):  # reaped between the caller's check and the read: ENOENT or ESRCH
        return "gone"


def test_a_stand_in_that_asks_before_the_template_is_up_waits_for_it(tmp_path):
    """A forked launcher's first worker, or the launcher itself, can ask within milliseconds of the template's start,
    before its socket is bound: the stand-in waits (up to CONNECT_WAIT_S) instead of starting cold."""
    sock = tmp_path / "late.sock"
    stand_in = _stand_in(sock, "exit", "5", cwd=tmp_path)
    time.sleep(0.5)  # the stand-in is asking by now; nothing is bound at sock yet
    proc = _template(sock)
    try:
        out, err = stand_in.communicate(timeout=30)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert stand_in.returncode == 5
    assert f"ppid={proc.pid} argv=['exit', '5']" in out, out + err  # forked by the late template
    assert "cold start" not in err


def test_without_a_template_the_worker_starts_cold_and_says_so(tmp_path):
    stand_in = _stand_in(tmp_path / "nothing-listens.sock", "exit", "3", cwd=tmp_path)
    out, err = stand_in.communicate(timeout=30)
    assert stand_in.returncode == 3
    assert f"payload pid={stand_in.pid} " in out  # exec'd in place: the stand-in became the worker
    assert f"[prefork] cold start of {PAYLOAD}: no template at {tmp_path / 'nothing-listens.sock'}" in err


def test_a_template_with_a_thread_refuses_to_fork_and_the_worker_starts_cold(tmp_path):
    sock = tmp_path / "threaded.sock"
    proc = _template(sock, "tests.helpers.prefork_thread")
    try:
        stand_in = _stand_in(sock, "exit", "0", cwd=tmp_path)
        out, err = stand_in.communicate(timeout=30)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert stand_in.returncode == 0
    assert f"payload pid={stand_in.pid} " in out
    assert f"the template at {sock} refused: 2 threads after the imports" in err


def test_the_template_removes_its_socket_on_sigterm(template):
    proc, sock = template
    assert sock.exists()
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 0
    assert not sock.exists()


def test_the_template_gives_the_rendezvous_the_cheap_method_name(tmp_path):
    """A launcher forked from the template records its rendezvous events without ``inspect.stack()``
    (:mod:`training.launch.rendezvous_names`): the template swapped the function after its imports."""
    sock = tmp_path / "t.sock"
    proc = _template(sock, "tests.helpers.rendezvous_stub")
    try:
        out, err = _stand_in(sock, "names", cwd=tmp_path).communicate(timeout=30)
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert "payload get_method_name from training.launch.rendezvous_names" in out, err


# ---- warm pods: a template forked into the requester from a zygote (ZYGOTE_ENV) -------------------------------------


def _adopting(sock: Path, zygote: Path, **env: str) -> subprocess.Popen:
    """``serve`` at ``sock`` asking the template at ``zygote`` for a template (what a pod's supervisor starts)."""
    argv = [sys.executable, "-m", "training.launch.prefork", "serve", "--socket", str(sock), "--warm", "json"]
    full_env = {**child_env(), "TRAINING_PREFORK_ZYGOTE": str(zygote), **env}
    return subprocess.Popen(
        argv, cwd=REPO_ROOT, env=full_env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def _ready_pid(line: str, sock: Path, zygote: Path) -> int:
    """The adopted template's pid from its ready line, which must name the zygote."""
    head, _, tail = line.partition(f" ready at {sock} (forked into this pod from the template at {zygote})")
    assert head.startswith("[prefork] template ") and tail == "\n", line
    return int(head.split()[-1])


def _kill_and_get_another(stand_in: subprocess.Popen, pid: int, sock: Path, zygote: Path) -> int:
    """SIGKILL the pod's template ``pid``; its stand-in must say so and ask for another: that one's pid."""
    assert stand_in.stdout is not None
    os.kill(pid, signal.SIGKILL)
    assert stand_in.stdout.readline() == f"[prefork] template {pid} was killed: another from {zygote}\n"
    return _ready_pid(stand_in.stdout.readline(), sock, zygote)


def test_an_adopted_template_forks_workers_and_a_killed_one_is_replaced_while_its_stand_in_stays(template, tmp_path):
    """The pod's supervisor SIGKILLs every process but the one it started after a launch: the template that process
    stands in for is then forked again, on the same socket, and workers keep coming from a template, never cold."""
    zygote_proc, zygote = template
    sock = tmp_path / "pod.sock"
    stand_in = _adopting(sock, zygote)
    try:
        assert stand_in.stdout is not None
        first = _ready_pid(stand_in.stdout.readline(), sock, zygote)
        assert first not in (stand_in.pid, zygote_proc.pid)
        out, err = _stand_in(sock, "exit", "4", cwd=tmp_path).communicate(timeout=30)
        assert f"ppid={first} argv=['exit', '4']" in out and "cold start" not in err
        second = _kill_and_get_another(stand_in, first, sock, zygote)
        out, err = _stand_in(sock, "exit", "5", cwd=tmp_path).communicate(timeout=30)
        assert f"ppid={second} argv=['exit', '5']" in out and "cold start" not in err
        stand_in.send_signal(signal.SIGTERM)  # reaches the template, which stops; the stand-in ends as it ended
        assert stand_in.wait(timeout=10) == 0
        assert not sock.exists() and not Path(f"/proc/{second}").exists()
    finally:
        stand_in.kill()


def test_a_template_killed_again_and_again_is_replaced_three_times_then_its_stand_in_ends_killed(template, tmp_path):
    """A kill that keeps coming (the OOM killer's) must reach the pod's supervisor: the fourth SIGKILL of the pod's
    template within a minute ends its stand-in by SIGKILL too, as a pod whose own template was killed would."""
    sock, zygote = tmp_path / "pod.sock", template[1]
    stand_in = _adopting(sock, zygote)
    try:
        assert stand_in.stdout is not None
        pid = _ready_pid(stand_in.stdout.readline(), sock, zygote)
        for _ in range(3):
            pid = _kill_and_get_another(stand_in, pid, sock, zygote)
        os.kill(pid, signal.SIGKILL)
        assert stand_in.stdout.readline() == f"[prefork] template {pid} was killed, 4 within 60 s: ending as it did\n"
        assert stand_in.wait(timeout=10) == -signal.SIGKILL
    finally:
        stand_in.kill()


def test_a_zygote_holding_a_module_the_requester_would_not_import_is_refused_and_the_requester_imports(tmp_path):
    """The zygote imported ``zmod`` from its own PYTHONPATH; the requester's interpreter has no such module, so a
    fork of the zygote would not be the template it would have become: it says so and imports itself."""
    (tmp_path / "extra").mkdir()
    (tmp_path / "extra" / "zmod.py").write_text("VALUE = 1\n")
    zygote = tmp_path / "zygote.sock"
    argv = [sys.executable, "-m", "training.launch.prefork", "serve", "--socket", str(zygote), "--warm", "zmod"]
    env = {**child_env(), "PYTHONPATH": str(tmp_path / "extra")}
    proc = subprocess.Popen(argv, cwd=REPO_ROOT, env=env, stdout=subprocess.PIPE, text=True)
    sock = tmp_path / "pod.sock"
    try:
        assert proc.stdout is not None and "ready" in proc.stdout.readline()
        refused = _adopting(sock, zygote)
        unreachable = _adopting(tmp_path / "pod2.sock", tmp_path / "no-zygote.sock")
        lines = [p.stdout.readline() + p.stdout.readline() for p in (refused, unreachable)]  # type: ignore[union-attr]
        for p in (refused, unreachable):
            p.terminate()
            assert p.wait(timeout=10) == 0
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    assert lines[0] == (
        f"[prefork] no template from {zygote}: 1 imported modules are not this pod's: "
        f"zmod ({tmp_path / 'extra' / 'zmod.py'}, here not found); importing here\n"
        f"[prefork] template {refused.pid} ready at {sock}\n"
    )
    assert lines[1].startswith(f"[prefork] no template from {tmp_path / 'no-zygote.sock'}: unreachable (")
    assert lines[1].endswith(
        f"importing here\n[prefork] template {unreachable.pid} ready at {tmp_path / 'pod2.sock'}\n"
    )


def test_a_pod_told_to_stop_while_it_asks_the_zygote_ends_by_it_instead_of_importing(tmp_path):
    """A pod's template SIGTERMed while its request to the zygote is unanswered (the zygote played here, on the
    protocol's framing): refused, it ends by that signal rather than importing and serving."""
    from training.launch.prefork import _recv_json, _send_json

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / "zygote.sock"))
    listener.listen(1)
    stand_in = _adopting(tmp_path / "pod.sock", tmp_path / "zygote.sock")
    conn, _ = listener.accept()
    listener.close()
    try:
        request, fds = _recv_json(conn, max_fds=4)
        for fd in fds:
            os.close(fd)
        assert request["adopt"] == str(tmp_path / "pod.sock")
        stand_in.send_signal(signal.SIGTERM)
        with pytest.raises(subprocess.TimeoutExpired):  # held while it asks
            stand_in.wait(timeout=2)
        _send_json(conn, {"error": "refused for the test"})
        out, _ = stand_in.communicate(timeout=30)
        assert stand_in.returncode == -signal.SIGTERM
        assert "importing here" not in out
        assert "ready at" not in out
    finally:
        stand_in.kill()
        conn.close()
