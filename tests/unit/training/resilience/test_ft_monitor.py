"""ft_launcher integration pieces that run without a launcher (real NVRx config parsing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_config import load_config
from training.resilience.ft_monitor import IPC_ENV, FtMonitor, ft_launcher_args, ft_launcher_yaml


def test_no_op_outside_ft_launcher(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(IPC_ENV, raising=False)
    mon = FtMonitor(enabled=True)
    mon.start()
    assert not mon.active and mon.client is None
    mon.heartbeat(1)
    with mon.section("step"):
        pass
    assert mon.request_shutdown("x") is False
    mon.load_state_dict({"rank_monitor": '{"current_timeouts": {}}'})
    assert mon.state_dict() == {"rank_monitor": '{"current_timeouts": {}}'}


def test_yaml_is_read_by_nvrx(tmp_path: Path) -> None:
    from nvidia_resiliency_ext.fault_tolerance import FaultToleranceConfig

    ft = load_config().local.ft
    path = tmp_path / "ft.yaml"
    path.write_text(ft_launcher_yaml(ft))
    parsed = FaultToleranceConfig.from_yaml_file(str(path))
    assert parsed.rank_heartbeat_timeout == ft.rank_heartbeat_timeout_s
    assert parsed.initial_rank_heartbeat_timeout == ft.initial_rank_heartbeat_timeout_s
    assert dict(parsed.rank_section_timeouts) == ft.section_timeouts_s
    assert "gpu_memory_poll_interval: 0.1\n" in path.read_text()  # read by NVRx 0.7.0; 0.4.1 ignores the key
    args = ft_launcher_args(ft, str(path), nproc=2, port=29999)
    assert f"--max-restarts={ft.max_restarts}" in args and "--rdzv-endpoint=127.0.0.1:29999" in args


RECONNECT_SCRIPT = """
import os, shutil, sys, tempfile, time
import torch.multiprocessing as mp
from nvidia_resiliency_ext.fault_tolerance.config import FaultToleranceConfig
from nvidia_resiliency_ext.fault_tolerance.rank_monitor_server import RankMonitorServer
from training.resilience.ft_monitor import SECTIONS, FtMonitor

if __name__ == "__main__":
    sock = os.path.join(tempfile.mkdtemp(), "rmon.socket")
    cfg = FaultToleranceConfig(
        initial_rank_heartbeat_timeout=60, rank_heartbeat_timeout=60, rank_section_timeouts={s: 60 for s in SECTIONS}
    )
    server = RankMonitorServer.run_in_subprocess(cfg, sock, mp_ctx=mp.get_context("spawn"))
    os.environ["FT_RANK_MONITOR_IPC_SOCKET"] = sock
    mon = FtMonitor(enabled=True)
    mon.start()
    mon.heartbeat(1)
    first = mon.client
    first.rank_monitor_socket.sendall(bytes(16))  # what a message cut in half leaves in the stream
    time.sleep(0.5)  # the monitor reads garbage and drops the connection
    mon.heartbeat(2)  # EPIPE -> reconnect -> resent
    with mon.section("step"):
        mon.heartbeat(3)
    print("reconnected", mon.client is not first, flush=True)

    # An exchange cut short from outside (NVRx raises its restart exception into the main thread at any bytecode):
    # here right after the reply's 4-byte length was read. Its body stays in the stream; read as the next reply's
    # length, it would make the client wait for bytes that never come (the blocked end_all_sections of the
    # local cluster). The next message must go over a fresh connection instead.
    class Restart(BaseException):
        pass

    class CutAfterLength:
        def __init__(self, sock):
            self.sock, self.reads = sock, 0
        def __getattr__(self, name):
            return getattr(self.sock, name)
        def recv(self, n):
            data = self.sock.recv(n)
            self.reads += 1
            if self.reads == 1:
                raise Restart()
            return data

    second = mon.client
    real = second.rank_monitor_socket
    real.settimeout(10)  # without the fix: a timeout error instead of a hang
    second.rank_monitor_socket = CutAfterLength(real)
    try:
        with mon.section("step"):
            pass
    except Restart:
        pass
    if second.rank_monitor_socket.__class__ is CutAfterLength:
        second.rank_monitor_socket = real
    mon.end_all_sections()  # what the in-process re-entry sends first
    mon.heartbeat(4)
    print("resynced", mon.client is not second, flush=True)

    # A section an in-process restart interrupted: open at the rank monitor and in the client's own record, unknown
    # to FtMonitor. The client's end_all_sections is made what NVRx 0.7.0's is: a no-op (its filter drops CLOSE_ALL).
    third = mon.client
    third.start_section("step")
    third.end_all_sections = lambda: None
    mon.end_all_sections()  # the in-process re-entry
    with mon.section("step"):  # 0.7.0 without the fix: "Tried to open step that is already open"
        pass
    # on the same connection: an "already open" error would have been taken for a broken stream and reconnected
    print("closed", mon.client is third, dict(mon.client.timeouts_calc.open_sections), flush=True)
    mon.shutdown()
    server.terminate()
    server.join()
    shutil.rmtree(os.path.dirname(sock))
"""


def test_a_broken_monitor_stream_is_reconnected_once(tmp_path: Path) -> None:
    """A real rank monitor (NVRx's server process) drops a corrupted stream; the next send reconnects. An exchange
    cut short leaves the stream out of step: the next message goes over a fresh connection."""
    import subprocess
    import sys

    from tests.helpers.training_runs import REPO_ROOT
    from tests.helpers.training_runs import test_env as child_env

    script = tmp_path / "reconnect.py"
    script.write_text(RECONNECT_SCRIPT)
    env = child_env(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", PYTHONPATH=str(REPO_ROOT))
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "reconnected True" in proc.stdout
    assert "send_heartbeat failed" in proc.stderr and "reconnecting to the rank monitor" in proc.stderr
    assert "resynced True" in proc.stdout
    assert "the start_section exchange was cut short; reconnecting" in proc.stderr
    assert "closed True {}" in proc.stdout  # the interrupted section was closed, then opened and closed again


def test_only_connection_errors_count_as_a_broken_stream() -> None:
    from training.resilience.ft_monitor import _stream_broken

    def wrapped(cause: BaseException) -> Exception:  # how NVRx's client reports a failed send
        err = RuntimeError("RankMonitorClient could not send the heartbeat")
        err.__context__ = cause
        return err

    assert _stream_broken(wrapped(BrokenPipeError(32, "Broken pipe")))
    assert _stream_broken(wrapped(EOFError()))
    assert not _stream_broken(wrapped(ValueError("Unknown section: step")))


def test_after_sigterm_a_broken_monitor_stream_is_dropped_not_reconnected(monkeypatch: pytest.MonkeyPatch) -> None:
    """ft_launcher closes its rank monitors when it forwards the pod's SIGTERM (their socket file goes): a rank making
    its final save (issue 47) must not reconnect (seen: FileNotFoundError, the rank's final save lost)."""
    from training.resilience import sigterm

    class Client:
        def send_heartbeat(self) -> None:
            err = RuntimeError("RankMonitorClient could not send the heartbeat")
            err.__context__ = BrokenPipeError(32, "Broken pipe")
            raise err

    def no_reconnect() -> None:
        raise AssertionError("reconnected after SIGTERM")

    monitor = FtMonitor(enabled=False)
    monitor.client = Client()
    monkeypatch.setattr(monitor, "reconnect", no_reconnect)
    monkeypatch.setattr(sigterm, "_stop", sigterm.StopRequest(requested_at=1.0))
    monitor.heartbeat(21)
    assert monitor.client is None
    monitor.heartbeat(22)  # nothing to send to any more
    with monitor.section("step"):
        pass
    monkeypatch.setattr(sigterm, "_stop", sigterm.StopRequest())  # without a SIGTERM: reconnected
    monitor.client = Client()
    with pytest.raises(AssertionError, match="reconnected after SIGTERM"):
        monitor.heartbeat(23)


def test_a_section_whose_start_finds_the_monitor_gone_after_sigterm_ends_quietly(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Seen on the local cluster (ft-launcher mode): an eviction's SIGTERM reached a rank in its set-up; the
    ``start_section`` exchange found the monitor gone and dropped the client, and the section's end then raised
    ``AttributeError: 'NoneType' object has no attribute 'end_section'`` instead of the rank stopping on SIGTERM."""
    from training.resilience import sigterm

    class Client:
        def start_section(self, name: str) -> None:
            err = RuntimeError("RankMonitorClient could not send section update. Exception: Unexpected reply: None")
            err.__context__ = ConnectionResetError(104, "Connection reset by peer")
            raise err

    monitor = FtMonitor(enabled=False)
    monitor.client = Client()
    monkeypatch.setattr(sigterm, "_stop", sigterm.StopRequest(requested_at=1.0))
    with monitor.section("setup"):
        pass
    assert monitor.client is None and not monitor._open
