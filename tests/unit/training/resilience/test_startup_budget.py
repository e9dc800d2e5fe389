"""The start-to-first-heartbeat estimate, by hand, and the synth-time refusal of timeouts that are too short."""

from __future__ import annotations

import pytest

from charts.topology import Topology
from platform_config import RecoveryMode, load_config
from tests.unit.charts.conftest import make_cfg, synth_job
from training.resilience.startup_budget import estimate, problems


def test_llama3_8b_on_4800_gib_by_hand():
    cfg = make_cfg(model={"size": "llama3-8b"}, storage={"fsx_capacity_gib": 4800})
    est = estimate(cfg)
    # setup 20 + 10 x 8.030 = 100.30 s; FSx 200 MB/s x 4800/1024 TiB = 937.5 MB/s; restore 2 x 96.363 GB / 937.5 MB/s
    assert est.setup_s == pytest.approx(100.3026, abs=1e-3)
    assert est.read_mb_s == pytest.approx(937.5)
    assert est.restore_s == pytest.approx(2 * 96_363_134_976 / 937.5e6)  # 205.57 s
    assert est.required_s == pytest.approx(1.5 * (100.3026 + 205.5747 + 10.0), abs=1e-2)  # 473.8 s
    late = problems(cfg)  # the defaults: 120 s initial heartbeat, 300 s setup section
    fields = [line.split(" = ")[0] for line in late]
    assert fields == ["ft.initial_rank_heartbeat_timeout_s", 'ft.section_timeouts_s["setup"]']
    assert "raise it to at least 474 s" in late[0]


def test_the_tiny_default_fits_and_the_prod_environment_was_raised():
    # tiny: 126,272 parameters; restore 2 x 12 x 126,272 bytes at 200 MB/s x 1200/1024 TiB = 234.375 MB/s
    restore = 2 * 12 * 126_272 / 234.375e6
    assert estimate(load_config()).required_s == pytest.approx(1.5 * (20 + 10 * 126_272 / 1e9 + restore + 10))
    assert problems(load_config()) == []
    assert problems(load_config().model_copy(update={"ft": load_config().local.ft})) == []  # the local 60 s
    assert problems(load_config(env="prod")) == []  # project.yaml sets 900 s for Llama 3.1 8B


def test_an_ft_launcher_job_with_too_short_timeouts_is_refused_at_synth():
    cfg = make_cfg(model={"size": "llama3-8b"}, storage={"fsx_capacity_gib": 4800})
    with pytest.raises(ValueError, match=r"ft\.initial_rank_heartbeat_timeout_s = 120 s is shorter"):
        synth_job(cfg, RecoveryMode.INPROCESS_FT, Topology.from_config(cfg))
    synth_job(cfg, RecoveryMode.K8S_ONLY, Topology.from_config(cfg))  # no ft_launcher: nothing to refuse
