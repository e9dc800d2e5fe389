"""Process-group settings that do not need a process group: backend, timeouts, precision."""

from __future__ import annotations

import pytest
import torch

from platform_config import load_config
from training.parallel import distributed


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU (gloo) choices")
def test_cpu_uses_gloo_with_the_short_abortable_timeout() -> None:
    ip = load_config().local.inprocess
    assert distributed.default_backend() == "gloo"
    assert distributed.device().type == "cpu"
    assert distributed.collective_timeout_s(ip) == ip.gloo_timeout_s


def test_nccl_timeout_exceeds_the_in_process_hard_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    # NVRx: the NCCL watchdog must not fire before the Wrapper's hard timeout (it would kill the process).
    monkeypatch.setattr(distributed, "default_backend", lambda: "nccl")
    cfg = load_config()
    for ip in (cfg.inprocess, cfg.local.inprocess, cfg.local.timeouts(cuda=True)[0]):
        assert distributed.collective_timeout_s(ip) > ip.hard_timeout_s


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU precision")
def test_cpu_trains_in_fp32() -> None:
    mp = distributed.mixed_precision_policy(torch.device("cpu"))
    assert mp.param_dtype == torch.float32 and mp.reduce_dtype == torch.float32
    assert distributed.mixed_precision_policy(torch.device("cuda", 0)).param_dtype == torch.bfloat16
