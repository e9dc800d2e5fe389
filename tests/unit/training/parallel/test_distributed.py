"""Process-group settings that do not need a process group (backend, timeouts, precision), and the gradient clip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from platform_config import load_config
from tests.helpers.training_runs import REPO_ROOT, torchrun
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


def test_plain_gradients_are_clipped_by_torch_s_clip() -> None:
    """Gradients that are not FSDP2's (no DTensor) go to torch's: [3, 4] has norm 5, scaled to norm 0.5."""
    p = torch.nn.Parameter(torch.zeros(2))
    p.grad = torch.tensor([3.0, 4.0])
    total = distributed.clip_grad_norm_([p], 0.5)
    assert total.item() == 5.0
    assert torch.allclose(p.grad, torch.tensor([0.3, 0.4]))


@pytest.mark.integration
def test_sharded_clip_is_torch_s_bit_for_bit_on_two_ranks(tmp_path: Path) -> None:
    """On FSDP2's gradients of the tiny model, over gloo: the same total norm and the same clipped shards as
    ``torch.nn.utils.clip_grad_norm_(foreach=True)``, whether it clips or not, and on a mesh of one rank."""
    torchrun([REPO_ROOT / "tests" / "helpers" / "clip_ranks.py", tmp_path], nproc=2, timeout_s=120)
    result = json.loads((tmp_path / "result.json").read_text())
    for case in ("clipped", "not clipped", "mesh of one"):
        got = result[case]
        assert got["equal_total"] and got["equal_shards"], (case, got)
    assert result["clipped"]["want"] > 0.5 and result["clipped"]["norm_after"] == pytest.approx(0.5, rel=1e-4)
    assert result["not clipped"]["norm_after"] == pytest.approx(result["not clipped"]["want"], rel=1e-6)
    assert result["mesh of one"]["want"] != result["clipped"]["want"]  # rank 0's own norm, not the two ranks'
