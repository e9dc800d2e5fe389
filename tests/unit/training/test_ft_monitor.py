"""ft_launcher integration pieces that run without a launcher (real NVRx config parsing)."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_config import load_config
from training.ft_monitor import IPC_ENV, FtMonitor, ft_launcher_args, ft_launcher_yaml


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
    args = ft_launcher_args(ft, str(path), nproc=2, port=29999)
    assert f"--max-restarts={ft.max_restarts}" in args and "--rdzv-endpoint=127.0.0.1:29999" in args
