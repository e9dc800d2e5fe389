"""Timeout sanity against measured times."""

from __future__ import annotations

import pytest

from platform_config import load_config
from training.resilience.exit_codes import fail_job_exit_codes
from training.resilience.exit_policy import exit_policy
from training.resilience.inprocess import RestartTracker
from training.resilience.timeout_check import (
    Measured,
    TimeoutConfigError,
    check,
    check_static,
    checkpoint_wait_s,
    enforce,
)


def test_measured_times_against_timeouts() -> None:
    cfg = load_config()
    assert check(cfg, Measured(init_s=1.0, step_s=0.5, checkpoint_s=2.0), inprocess=True, ft_launcher=True) == []
    slow_step = check(cfg, Measured(step_s=35.0), inprocess=True, ft_launcher=True)
    assert {(f.level, f.field) for f in slow_step} >= {
        ("error", "inprocess.soft_timeout_s"),
        ("warning", "ft.rank_heartbeat_timeout_s"),
    }
    with pytest.raises(TimeoutConfigError, match=r"inprocess\.soft_timeout_s"):
        enforce(slow_step, log=lambda _: None)
    # without the in-process layer only ft_launcher's timeouts apply
    assert all(f.field.startswith("ft.") for f in check(cfg, Measured(step_s=25.0), inprocess=False, ft_launcher=True))
    assert check(cfg, Measured(step_s=1e6), inprocess=False, ft_launcher=False) == []


def test_static_layer_ordering() -> None:
    cfg = load_config()
    assert (
        check_static(
            cfg.model_copy(update={"inprocess": cfg.local.inprocess, "ft": cfg.local.ft}),
            inprocess=True,
            ft_launcher=True,
        )
        == []
    )
    # defaults: soft 20 s, hard 30 s, step budget floor 3 s: at steps the hard timeout is 3 + 10 = 13 s at least
    tight_ft = cfg.ft.model_copy(update={"rank_heartbeat_timeout_s": 12.0})
    findings = check_static(cfg.model_copy(update={"ft": tight_ft}), inprocess=True, ft_launcher=True)
    assert [(f.level, f.field) for f in findings] == [("warning", "inprocess.hard_timeout_s")]
    assert findings[0].message.startswith("the shortest step budget (3 s) + hard - soft (10 s) is not below")


def test_a_raised_start_up_timeout_only_notes_that_the_first_steps_hangs_go_to_ft_launcher() -> None:
    """The 1B model on 1 x H100: start-up raised the soft timeout to 38.2 s (hard 48.2 s) against ft's 37.5 s step
    section; a hang at step 200 was recovered in-process in 4.3 s (its step budget 2.5 s + 10 s)."""
    cfg = load_config()
    ip = cfg.inprocess.model_copy(update={"soft_timeout_s": 38.2, "hard_timeout_s": 48.2})
    ft = cfg.ft.model_copy(update={"rank_heartbeat_timeout_s": 60.0, "section_timeouts_s": {"step": 37.5}})
    findings = check_static(cfg.model_copy(update={"inprocess": ip, "ft": ft}), inprocess=True, ft_launcher=True)
    assert [str(f) for f in findings] == [
        "note: inprocess.hard_timeout_s: 48.2 s is not below ft_launcher's step heartbeat/section timeout (37.5 s): a "
        "hang in the first 5 steps of a (re)start, before the step budget is measured, goes to ft_launcher; later ones "
        "the in-process layer recovers (the step budget + 10 s)"
    ]


@pytest.mark.parametrize(("section_s", "wait_s"), [(30.0, 27.0), (8.0, 6.0), (3.0, 1.5), (1200.0, 1080.0)])
def test_a_rank_gives_up_on_a_write_a_tenth_before_its_checkpoint_section_ends(section_s, wait_s) -> None:
    """A tenth short of the section, at least 2 s (8 s -> 6 s) and at most half of it (3 s -> 1.5 s)."""
    assert checkpoint_wait_s(section_s) == pytest.approx(wait_s)


def test_a_misconfigured_timeout_ends_the_worker_with_exit_2_and_fails_the_job() -> None:
    """Issue 48, item 8: a soft timeout below the measured step time is certain to misfire: the worker exits with the
    configuration code (2), final (no restart can help), naming the field."""
    cfg = load_config()
    findings = check(cfg, Measured(step_s=35.0), inprocess=True, ft_launcher=True)
    with pytest.raises(TimeoutConfigError) as info:
        enforce(findings, log=lambda _: None)
    out = exit_policy(info.value, RestartTracker(), completed=False, ft_launcher=True, rank=0, unrecoverable=42)
    assert (out.code, out.cause, out.final) == (2, "config", True)
    assert out.message.startswith("timeout misconfigured: inprocess.soft_timeout_s ")
    assert 2 in fail_job_exit_codes(42)  # Kubernetes fails the Job instead of restarting the pod
