"""The start-to-first-heartbeat estimate, by hand, and the synth-time refusal of timeouts that are too short."""

from __future__ import annotations

import pytest

from charts.topology import Topology
from platform_config import RecoveryMode, load_config
from tests.unit.charts.conftest import make_cfg, synth_job
from training.resilience import startup_budget
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


def _sized(size: str):
    cfg = load_config()
    return cfg.model_copy(update={"model": cfg.model.model_copy(update={"size": size})})


def test_a_local_1b_run_on_cuda_gets_its_start_up_budget_by_hand() -> None:
    """1B (974,227,456 parameters, 11.69 GB of state): set-up 5 + 6 x 0.974 = 10.85 s, restore 2 x 11.69 GB at
    2 GB/s = 11.69 s, first step 1 + 2 x 0.974 = 2.95 s: 25.49 s, x 1.5 = 38.2 s, above the scaled 10 s."""
    est = startup_budget.local_estimate("1b", cuda=True)
    assert (round(est.setup_s, 2), round(est.restore_s, 2), round(est.first_step_s, 2)) == (10.85, 11.69, 2.95)
    ip, ft, lines = startup_budget.local_timeouts(_sized("1b"), cuda=True)
    # soft raised by 28.2 s; hard, barrier and completion move with it (gaps kept, so soft < hard < barrier)
    assert (ip.soft_timeout_s, ip.hard_timeout_s, ip.barrier_timeout_s, ip.completion_timeout_s) == (
        38.2,
        48.2,
        78.2,
        78.2,
    )
    assert ip.step_timeout_floor_s == 2.0 and ip.step_timeout_factor == 10.0  # a step's budget stays derived
    assert ft.initial_rank_heartbeat_timeout_s == 150.0  # 60 s x 2.5 already covers it
    assert lines[1].startswith("inprocess.soft_timeout_s raised to 38.2 s (hard 48.2, barrier 78.2)")


def test_the_tiny_model_keeps_the_local_timeouts_and_a_measured_set_up_raises_them() -> None:
    cfg = _sized("tiny")
    ip, ft, lines = startup_budget.local_timeouts(cfg, cuda=False)
    assert (ip, ft) == cfg.local.timeouts(cuda=False) and len(lines) == 1  # derived, printed, nothing raised
    # an earlier launch of the run measured a 9 s set-up: (9 + 0.0 + 0.5) x 1.5 = 14.3 s
    ip, _, lines = startup_budget.local_timeouts(cfg, cuda=False, measured_init_s=9.0)
    assert ip.soft_timeout_s == 14.3 and ip.hard_timeout_s == 18.3


def test_llama3_8b_locally_raises_ft_launcher_s_first_heartbeat_too() -> None:
    _, ft, lines = startup_budget.local_timeouts(_sized("llama3-8b"), cuda=True)
    assert ft.initial_rank_heartbeat_timeout_s == ft.section_timeouts_s["setup"] == 249.9
    assert ft.section_timeouts_s["step"] == 37.5  # the other sections as configured (15 s x 2.5)
    assert lines[-1] == "ft_launcher's first-heartbeat and setup-section timeouts raised to 249.9 s"


def test_the_cluster_raises_what_a_1b_worker_would_outlast_instead_of_refusing() -> None:
    """``make synth`` of the 1B environment with the default timeouts: ft_launcher's 120 s first heartbeat and 300 s
    setup section against 1.5 x (30 + 99.8 + 10) s = 209.7 s on 1200 GiB of FSx; the in-process soft timeout's 20 s
    against 1.5 x (10.85 + 2.95) s = 20.7 s. Each is raised, with its line; the tiny default is left as it is."""
    cfg, lines = startup_budget.fit_cluster_timeouts(load_config(env="scale-1b"))
    assert cfg.ft.initial_rank_heartbeat_timeout_s == 210.0 and cfg.ft.section_timeouts_s["setup"] == 300.0
    assert (cfg.inprocess.soft_timeout_s, cfg.inprocess.hard_timeout_s, cfg.inprocess.barrier_timeout_s) == (21, 31, 61)
    assert problems(cfg) == [] and len(lines) == 2
    assert lines[0].startswith('ft.initial_rank_heartbeat_timeout_s and ft.section_timeouts_s["setup"] raised')
    tiny = load_config()
    assert startup_budget.fit_cluster_timeouts(tiny) == (tiny, [])
