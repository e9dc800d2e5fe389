"""The restart-memory benchmark's reading of a run, on the event logs of two recorded GPU runs (2 x H200, recorded in
commit 1024144, 2026-12-01: tests/golden/gpu/restart-memory-leaking.tgz before the fix of the writer's CUDA IPC leak,
restart-memory-fixed.tgz after it)."""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
import yaml

from benchmarks.restart_memory import overrides, restarts
from platform_config import config_from_dict
from platform_config.loader import DEFAULT_CONFIG_PATH, deep_merge

RECORDED = Path(__file__).resolve().parents[3] / "tests" / "golden" / "gpu"


def _recorded(name: str) -> list[dict]:
    with tarfile.open(RECORDED / f"restart-memory-{name}.tgz") as archive:
        member = archive.extractfile("tmp/leak/events.jsonl")
        assert member is not None
        return [json.loads(line) for line in member.read().decode().splitlines() if line.strip()]


def test_the_recorded_leak_grows_by_a_shard_per_restart_and_the_fixed_run_does_not() -> None:
    before = restarts(_recorded("leaking"))
    assert [r["allocated_mib"] for r in before] == [0.0, 5640.4, 11218.6, 16794.1, 16794.1, 22371.5, 22371.5]
    assert [r["tier"] for r in before] == ["none", "memory", "memory", None, "memory", None, "memory"]
    after = restarts(_recorded("fixed"))
    assert [r["allocated_mib"] for r in after] == [0.0, 64.0, 64.0, 64.0]
    assert [r["reserved_mib"] for r in after] == [0.0, 23200.0, 25424.0, 27648.0]
    assert [(r["model_s"], r["meta"]) for r in after][:2] == [(9.8746, False), (9.2644, False)]
    assert [r["restore_s"] for r in after] == [0.0063, 1.6606, 1.5229, 2.7637]
    assert restarts(_recorded("fixed"), rank=1)[1]["allocated_mib"] == 64.0  # rank 1's own start events


@pytest.mark.parametrize("size", ["tiny", "1b"])
def test_the_run_s_overrides_make_a_valid_configuration(size: str) -> None:
    """The 1B run needs longer local timeouts than the tiny model's (its set-up takes ~10 s): a bad combination would
    only show as a refused run on the GPU machine (two device calls were lost that way on 2026-12-01)."""
    project = yaml.safe_load(Path(DEFAULT_CONFIG_PATH).read_text())
    cfg = config_from_dict(deep_merge(project, overrides(size, 20)))
    assert (cfg.model.size, cfg.checkpoint.interval_steps) == (size, 20)
    soft = cfg.local.timeouts(cuda=True)[0].soft_timeout_s
    assert soft == (40.0 if size == "1b" else cfg.local.inprocess.soft_timeout_s * cfg.local.cuda_timeout_scale)
