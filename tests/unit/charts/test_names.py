import pytest

from charts import names
from platform_config import RecoveryMode
from tests.unit.charts.conftest import make_cfg


def test_variant_names_and_rank0_address(cfg):
    mode = RecoveryMode.FT_LAUNCHER
    assert names.job_name(cfg, mode) == f"{cfg.job.job_name}-ft-launcher"
    assert names.rendezvous_host(cfg, mode) == f"{cfg.job.job_name}-ft-launcher-0.{names.service_name(cfg)}"
    assert names.run_dir(cfg, mode) == f"{cfg.storage.mount_path}/runs/{cfg.job.job_name}-ft-launcher"


def test_every_mode_has_a_distinct_job_name(cfg):
    assert len({names.job_name(cfg, m) for m in RecoveryMode}) == len(RecoveryMode)


def test_pod_hostname_too_long_is_rejected():
    cfg = make_cfg(job={"job_name": "j" * 50})
    with pytest.raises(ValueError, match="longer than 63"):
        names.job_name(cfg, RecoveryMode.INPROCESS_FT)
