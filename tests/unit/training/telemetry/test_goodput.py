"""The goodput math on synthetic event logs; every expected number is computed by hand in the comments."""

from __future__ import annotations

import json
from typing import Any

import pytest

from training.telemetry.goodput import analyze, load_events, parse_event_lines, percentile, summary_stats


def ev(ts: float, event: str, *, rank: int = 0, layer: str = "inprocess", gen: tuple[int, int, int] = (0, 0, 0),
       **fields: Any) -> dict[str, Any]:  # fmt: skip
    """One record as EventLog writes it; gen = (restart, attempt, iteration)."""
    restart, attempt, iteration = gen
    return {"ts": ts, "mono": ts, "rank": rank, "iteration": iteration, "restart": restart, "attempt": attempt,
            "layer": layer, "event": event, **fields}  # fmt: skip


def steps(first: int, last: int, t_first: float, *, dt: float = 1.0, step_s: float | None = 0.8, **kw: Any):
    out = []
    for i, s in enumerate(range(first, last + 1)):
        fields = {"step": s, "loss": 1.0, "tokens": 512}
        if step_s is not None:
            fields["step_s"] = step_s
        out.append(ev(t_first + i * dt, "step", **fields, **kw))
    return out


# --------------------------------------------------------------------------- scenario A: one in-process recovery
def scenario_a() -> list[dict[str, Any]]:
    return [
        ev(0.0, "start", rank=0, world_size=2, mode="inprocess", device="cpu"),
        ev(0.0, "start", rank=1, world_size=2, mode="inprocess", device="cpu"),
        *steps(1, 4, 1.0),  # steps 1..4 end at t=1,2,3,4 (step_s 0.8)
        ev(4.1, "ckpt_begin", step=4, mode="async"),
        ev(4.6, "ckpt_staged", step=4, stall_s=0.5),
        ev(5.6, "step", step=5, loss=1.0, tokens=512, step_s=0.8),  # gap 4 -> 5 = 1.6 s, holds the checkpoint
        ev(6.1, "ckpt_committed", step=4, write_s=2.0, path="ckpt/4"),
        *steps(6, 7, 6.6),  # t=6.6, 7.6
        ev(8.0, "fault_injected", rank=1, kind="exception", step=8, fault_rank=1),
        ev(8.5, "restart_begin", rank=0, cause="exception", layer="inprocess"),
        ev(8.6, "restart_begin", rank=1, cause="exception", layer="inprocess"),  # the same restart seen by rank 1
        ev(9.0, "restart_end", rank=0, layer="inprocess"),
        ev(9.5, "restore", rank=0, from_step=4, tier="persistent"),
        *steps(5, 8, 10.5),  # re-executed 5..7, then 8: t=10.5 .. 13.5
        ev(14.0, "exit", rank=0, reason="done", code=0),
    ]


def test_scenario_a_goodput() -> None:
    a = analyze(scenario_a())
    # wall = 14.0 - 0.0
    assert a.wall_s == pytest.approx(14.0)
    assert a.final_step == 8
    # kept = last execution of each step 1..8 = 8 x step_s 0.8 = 6.4 s; 6.4 / 14
    assert a.productive_s == pytest.approx(6.4)
    assert a.training_goodput == pytest.approx(6.4 / 14)
    # working: [0, 8.0) until the fault + [9.0, 14.0) from restart_end to exit = 8 + 5 = 13; 13 / 14
    assert a.working_intervals == [(0.0, 8.0), (9.0, 14.0)]
    assert a.infrastructure_goodput == pytest.approx(13 / 14)


def test_scenario_a_fault() -> None:
    a = analyze(scenario_a())
    assert len(a.faults) == 1
    f = a.faults[0]
    assert (f.kind, f.step, f.rank, f.layer, f.injected) == ("exception", 8, 1, "inprocess", True)
    # detection = first restart_begin 8.5 - fault 8.0
    assert f.detection_s == pytest.approx(0.5)
    # recovery = first step after the restore (9.5) is at 10.5; 10.5 - 8.0
    assert f.recovery_s == pytest.approx(2.5)
    # rollback = fault step 8 - restored step 4
    assert f.rollback_steps == 4
    # steps 5, 6, 7 had been computed before the restore: 3 x 0.8
    assert f.rollback_s == pytest.approx(2.4)
    # lost work adds the partial step in flight: fault 8.0 - last step end 7.6 = 0.4
    assert f.lost_work_s == pytest.approx(2.8)
    assert a.recovery_by_layer() == {"inprocess": {"p50": 2.5, "p95": 2.5, "max": 2.5, "n": 1}}
    # two ranks logged restart_begin for one restart
    assert a.restart_causes()["total"] == 1
    assert a.restart_causes()["by_cause"] == {"exception": 1}


def test_scenario_a_checkpoint_and_freshness() -> None:
    a = analyze(scenario_a())
    ck = a.checkpoint_summary()
    assert (ck["saves"], ck["mode"], ck["stall_s_p50"], ck["write_s_p50"]) == (1, "async", 0.5, 2.0)
    # step gaps inside segments: 2,3,4 -> 1.0; 5 -> 1.6 (checkpoint); 6,7 -> 1.0; after the restore 6,7,8 -> 1.0.
    # with checkpoints: (8 x 1.0 + 1.6) / 9 = 1.0667; without: 1.0; efficiency = 1.0 / 1.0667 = 0.9375
    assert a.step_s_with_ckpt == pytest.approx(9.6 / 9)
    assert a.step_s_without_ckpt == pytest.approx(1.0)
    assert ck["efficiency"] == pytest.approx(0.9375)
    # freshness: spans run start 0 -> commit 6.1 -> end 14.0 = 6.1 and 7.9; max 7.9;
    # time-mean = (6.1^2/2 + 7.9^2/2) / 14 = (18.605 + 31.205) / 14 = 3.557857
    assert a.freshness_max_s == pytest.approx(7.9)
    assert a.freshness_mean_s == pytest.approx(49.81 / 14)


def test_a_failed_restore_is_not_a_failed_save() -> None:
    events = scenario_a()
    events.insert(-2, ev(9.4, "ckpt_failed", rank=0, step=4, error="EIO: Input/output error", op="restore"))
    ck = analyze(events).checkpoint_summary()
    assert (ck["saves"], ck["failed"]) == (1, 0)


def test_scenario_a_to_json_has_the_report_keys() -> None:
    j = analyze(scenario_a()).to_json()
    for key in ("training_goodput", "infrastructure_goodput", "wall_seconds", "final_step", "faults",
                "recovery_s_by_layer", "checkpoint"):  # fmt: skip
        assert key in j
    assert set(j["faults"][0]) >= {"kind", "layer", "step", "rank", "detection_s", "recovery_s", "rollback_steps"}
    assert set(j["checkpoint"]) >= {"saves", "stall_s_p50", "write_s_p50", "efficiency"}
    assert j["faults"][0]["time_s"] == pytest.approx(8.0)  # relative to the first event
    json.dumps(j)  # serialisable


# --------------------------------------------------------------------------- scenario B: no faults, no checkpoints
def test_no_faults_no_checkpoints_and_missing_step_s() -> None:
    events = [ev(0.0, "start"), *steps(1, 5, 1.0, step_s=None), ev(5.5, "exit", reason="done", code=0)]
    a = analyze(events)
    # durations: steps 2..5 have gaps of 1.0; step 1 has neither step_s nor a gap -> median 1.0
    # productive 5.0 / wall 5.5
    assert a.training_goodput == pytest.approx(5.0 / 5.5)
    assert a.infrastructure_goodput == pytest.approx(1.0)
    assert any("median step time" in w for w in a.warnings)
    assert a.faults == [] and a.recovery_by_layer() == {}
    ck = a.checkpoint_summary()
    assert ck["saves"] == 0 and ck["stall_s_p50"] is None
    # no checkpoint in any gap: with == without -> 1.0
    assert ck["efficiency"] == pytest.approx(1.0)
    # no commit: the age runs from the run start to the end; mean = 5.5^2/2 / 5.5 = 2.75
    assert a.freshness_max_s == pytest.approx(5.5)
    assert a.freshness_mean_s == pytest.approx(2.75)


def test_launch_event_starts_the_wall_clock_but_is_not_working_time() -> None:
    # the same run as above, launched 4.5 s before the first worker event (imports, rendezvous):
    # wall 10.0, productive 5.0, working 5.5 (start -> exit); the launch opens no working interval
    events = [
        ev(-4.5, "launch", rank=-1, layer="job", launcher="ft_launcher", nproc=2, mode="inprocess-ft"),
        ev(0.0, "start"),
        *steps(1, 5, 1.0, step_s=None),
        ev(5.5, "exit", reason="done", code=0),
    ]
    a = analyze(events)
    assert a.wall_s == pytest.approx(10.0)
    assert a.training_goodput == pytest.approx(5.0 / 10.0)
    assert a.infrastructure_goodput == pytest.approx(5.5 / 10.0)


# ------------------------------------------------ scenario C: fault before the first checkpoint
def scenario_c() -> list[dict[str, Any]]:
    """sigkill under ft_launcher; nobody logs restart_begin: the new process generation is the detection."""
    return [
        ev(0.0, "start", rank=0, layer="ft_launcher"),
        ev(0.0, "start", rank=1, layer="ft_launcher"),
        *steps(1, 3, 1.0, step_s=1.0),
        ev(3.2, "fault_injected", rank=1, kind="sigkill", step=4, fault_rank=1),
        ev(6.0, "start", rank=0, layer="ft_launcher", gen=(1, 0, 0)),
        ev(6.1, "start", rank=1, layer="ft_launcher", gen=(1, 0, 0)),
        ev(6.5, "restore", from_step=0, tier="none", gen=(1, 0, 0)),
        *steps(1, 4, 7.5, step_s=1.0, gen=(1, 0, 0)),  # t=7.5 .. 10.5
        ev(11.0, "exit", reason="done", code=0, gen=(1, 0, 0)),
    ]


def test_fault_before_first_checkpoint() -> None:
    a = analyze(scenario_c())
    # kept 4 x 1.0 / wall 11; working [0, 3.2) + [6.0, 11.0) = 8.2
    assert a.training_goodput == pytest.approx(4 / 11)
    assert a.infrastructure_goodput == pytest.approx(8.2 / 11)
    (f,) = a.faults
    # detection = new process start 6.0 - 3.2; restart counter moved -> ft_launcher
    assert f.detection_s == pytest.approx(2.8)
    assert f.detection_source == "new_process"
    assert f.layer == "ft_launcher"
    # recovery = first step after the restore (6.5) at 7.5; 7.5 - 3.2
    assert f.recovery_s == pytest.approx(4.3)
    # no checkpoint: restored step 0, rollback 4 - 0; steps 1..3 done before -> 3.0 s; lost adds 3.2 - 3.0
    assert (f.restored_step, f.rollback_steps) == (0, 4)
    assert f.rollback_s == pytest.approx(3.0)
    assert f.lost_work_s == pytest.approx(3.2)
    # the inferred restart counts as a restart with the fault's kind as cause
    assert a.restart_causes()["by_layer_and_cause"] == {"ft_launcher/sigkill": 1}
    assert a.checkpoint_summary()["saves"] == 0


# --------------------------------------------------------------------------- scenario D: the same step restarted twice
def scenario_d() -> list[dict[str, Any]]:
    return [
        ev(0.0, "start"),
        *steps(1, 3, 1.0, step_s=1.0),
        ev(3.05, "ckpt_begin", step=3, mode="sync"),
        ev(3.55, "ckpt_staged", step=3, stall_s=0.5),
        ev(3.55, "ckpt_committed", step=3, write_s=0.5, path="ckpt/3"),
        *steps(4, 5, 4.5, step_s=1.0),  # t=4.5, 5.5
        ev(5.6, "fault_injected", kind="exception", step=6, fault_rank=0),
        ev(5.8, "restart_begin", cause="exception", layer="inprocess"),
        ev(6.0, "restart_end", layer="inprocess", gen=(0, 0, 1)),
        ev(6.2, "restore", from_step=3, tier="persistent", gen=(0, 0, 1)),
        *steps(4, 5, 7.2, step_s=1.0, gen=(0, 0, 1)),  # t=7.2, 8.2
        ev(8.3, "fault_injected", kind="exception", step=6, fault_rank=0, gen=(0, 0, 1)),
        ev(8.5, "restart_begin", cause="exception", layer="inprocess", gen=(0, 0, 1)),
        ev(9.0, "restart_begin", cause="inprocess_exhausted", layer="ft_launcher", gen=(0, 0, 1)),  # escalation
        ev(10.0, "start", gen=(1, 0, 0)),
        ev(10.5, "restore", from_step=3, tier="persistent", gen=(1, 0, 0)),
        *steps(4, 7, 11.5, step_s=1.0, gen=(1, 0, 0)),  # t=11.5 .. 14.5
        ev(15.0, "exit", reason="done", code=0, gen=(1, 0, 0)),
    ]


def test_same_step_restarted_twice_with_escalation() -> None:
    a = analyze(scenario_d())
    # final 7; kept: 1..3 (first pass) + 4..7 (third pass) = 7 x 1.0; wall 15
    assert a.final_step == 7
    assert a.training_goodput == pytest.approx(7 / 15)
    # working [0, 5.6) + [6.0, 8.3) + [10.0, 15.0) = 5.6 + 2.3 + 5.0 = 12.9
    assert a.infrastructure_goodput == pytest.approx(12.9 / 15)
    fa, fb = a.faults
    # A: detect 5.8 - 5.6; first step after restore 6.2 is 7.2 -> 1.6; rollback 6 - 3; steps 4, 5 redone (2.0);
    # lost adds 5.6 - 5.5
    assert (fa.layer, fa.rollback_steps) == ("inprocess", 3)
    assert fa.detection_s == pytest.approx(0.2)
    assert fa.recovery_s == pytest.approx(1.6)
    assert fa.rollback_s == pytest.approx(2.0)
    assert fa.lost_work_s == pytest.approx(2.1)
    # B: in-process tried, ft_launcher recovered; detect 8.5 - 8.3; restore 10.5 -> step at 11.5: 11.5 - 8.3 = 3.2;
    # the latest executions of steps 4, 5 before that restore (t=7.2, 8.2) are the rolled-back work: 2.0
    assert fb.layers_tried == ["inprocess", "ft_launcher"]
    assert fb.layer == "ft_launcher"
    assert fb.detection_s == pytest.approx(0.2)
    assert fb.recovery_s == pytest.approx(3.2)
    assert fb.rollback_s == pytest.approx(2.0)
    assert fb.lost_work_s == pytest.approx(2.1)
    assert a.recovery_by_layer() == {
        "ft_launcher": {"p50": 3.2, "p95": 3.2, "max": 3.2, "n": 1},
        "inprocess": {"p50": 1.6, "p95": 1.6, "max": 1.6, "n": 1},
    }
    rc = a.restart_causes()
    assert rc["total"] == 3
    assert rc["by_layer"] == {"ft_launcher": 1, "inprocess": 2}
    # executed 3 + 2 + 2 + 4 = 11, kept 7
    assert a.to_json()["steps"] == {"executed": 11, "kept": 7, "re_executed": 4, "discarded": 4}


def test_detected_ts_of_restart_begin_is_the_detection() -> None:
    events = scenario_a()
    for e in events:
        if e["event"] == "restart_begin":
            e["detected_ts"] = 8.2 if e["rank"] == 0 else 8.3  # the earliest rank's detection wins
    (f,) = analyze(events).faults
    # detection = 8.2 - 8.0; recovery still runs to the first new step (10.5 - 8.0)
    assert f.detection_s == pytest.approx(0.2)
    assert f.recovery_s == pytest.approx(2.5)


def test_restart_without_injected_fault_is_reported() -> None:
    events = [
        ev(0.0, "start"),
        *steps(1, 3, 1.0, step_s=1.0),
        ev(3.5, "restart_begin", cause="heartbeat_timeout", layer="ft_launcher"),
        ev(5.0, "start", gen=(1, 0, 0)),
        ev(5.5, "restore", from_step=2, tier="persistent", gen=(1, 0, 0)),
        ev(6.5, "step", step=3, step_s=1.0, gen=(1, 0, 0)),
        ev(7.0, "exit", reason="done", code=0, gen=(1, 0, 0)),
    ]
    (f,) = analyze(events).faults
    # in flight: step 4 (last done 3); detection is the restart itself (0); recovery 6.5 - 3.5;
    # rollback 4 - 2 = 2 steps, of which step 3 had been computed (1.0 s)
    assert (f.kind, f.injected, f.step, f.layer) == ("uninjected:heartbeat_timeout", False, 4, "ft_launcher")
    assert f.detection_s == 0.0
    assert f.recovery_s == pytest.approx(3.0)
    assert (f.rollback_steps, f.rollback_s) == (2, pytest.approx(1.0))


def test_unrecovered_fault() -> None:
    events = [ev(0.0, "start"), *steps(1, 2, 1.0), ev(2.5, "fault_injected", kind="hang", step=3, fault_rank=0)]
    a = analyze(events)
    (f,) = a.faults
    assert f.detection_s is None and f.recovery_s is None and f.layer is None
    assert a.recovery_by_layer() == {}
    assert not any("no exit event" in w for w in a.warnings)  # closed by the fault, nothing left open
    assert a.infrastructure_goodput == pytest.approx(1.0)  # [0, 2.5) of a 2.5 s run


# --------------------------------------------------------------------------- robustness
def test_torn_and_malformed_lines(tmp_path) -> None:
    good = [json.dumps(e) for e in scenario_a()]
    lines = [*good[:5], '{"ts": 4.05, "event": "st', '{"event": "step"}', "[1, 2]", "", *good[5:], '{"ts": 99, "ev']
    (tmp_path / "events.jsonl").write_text("\n".join(lines))
    loaded = load_events(tmp_path)
    assert (loaded.torn_lines, loaded.malformed) == (2, 2)
    assert len(loaded.events) == len(good)
    assert analyze(loaded.events).training_goodput == pytest.approx(6.4 / 14)


def test_out_of_order_lines_are_sorted() -> None:
    lines = [json.dumps(e) for e in reversed(scenario_a())]
    assert analyze(parse_event_lines(lines).events).wall_s == pytest.approx(14.0)


def test_empty_log_does_not_crash() -> None:
    a = analyze([])
    j = a.to_json()
    assert j["training_goodput"] is None and j["final_step"] is None
    assert "empty" in j["warnings"][0]


def test_steps_only_log() -> None:
    a = analyze(steps(1, 3, 1.0, step_s=1.0))
    # no start/restart_end: infrastructure goodput is unknowable
    assert a.infrastructure_goodput is None
    assert any("infrastructure goodput cannot be measured" in w for w in a.warnings)
    # wall = 3.0 - 1.0; step 1 ends at the first event, so none of its 1.0 s lies inside the run:
    # productive = 0 + 1.0 + 1.0 = 2.0 -> goodput 1.0 (never above 1)
    assert a.productive_s == pytest.approx(2.0)
    assert a.training_goodput == pytest.approx(1.0)


def test_step_event_without_step_number_is_ignored() -> None:
    a = analyze([ev(0.0, "start"), ev(1.0, "step", step_s=1.0), *steps(1, 1, 2.0), ev(3.0, "exit")])
    assert len(a.steps) == 1
    assert any("without an integer 'step'" in w for w in a.warnings)


# --------------------------------------------------------------------------- percentiles
def test_percentile_linear_interpolation() -> None:
    # [1, 2, 3, 4]: p50 at position 1.5 -> 2.5; p95 at position 2.85 -> 3 + 0.85 * (4 - 3) = 3.85
    assert percentile([4.0, 1.0, 3.0, 2.0], 50) == pytest.approx(2.5)
    assert percentile([4.0, 1.0, 3.0, 2.0], 95) == pytest.approx(3.85)
    assert percentile([7.0], 95) == 7.0
    assert percentile([], 50) is None
    assert summary_stats([1.0, 3.0]) == {"p50": 2.0, "p95": pytest.approx(2.9), "max": 3.0, "n": 2}
