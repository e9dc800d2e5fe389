"""The Trainer in one process on a real one-rank gloo group: what it hands the checkpoint layer."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_config import config_from_dict
from tests.helpers.training_runs import FAST_CONFIG, group_timeout_s, single_process_group
from training.parallel import distributed
from training.telemetry.events import EventLog
from training.trainer import Trainer


def test_the_checkpoint_group_keeps_its_deadline_when_the_default_group_is_nccl(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On CUDA the default group is NCCL with ``barrier_timeout_s`` (above the in-process hard timeout, as NVRx
    requires). The checkpoint group is gloo, which NVRx cannot abort: it must not inherit that timeout (nor
    torch's 30-minute default), so a rank blocked in a checkpoint collective leaves before the hard timeout."""
    cfg = config_from_dict(FAST_CONFIG)
    ip = cfg.inprocess
    monkeypatch.setattr(distributed, "default_backend", lambda: "nccl")  # the lookup training.train makes on CUDA
    default_s = distributed.collective_timeout_s(ip)
    assert default_s == ip.barrier_timeout_s > ip.hard_timeout_s
    with single_process_group(timeout_s=default_s):
        trainer = Trainer(cfg, tmp_path, EventLog(tmp_path, 0), checkpoint_mode="sync", target_steps=1)
        trainer.setup()
        assert trainer.ckpt is not None
        assert group_timeout_s(trainer.ckpt.pg) == ip.gloo_timeout_s == 10.0
        assert ip.gloo_timeout_s < ip.hard_timeout_s
        trainer.close()
