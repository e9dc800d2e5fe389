"""The goodput math on event logs written in the trainer's order (``tests.helpers.event_log``); every expected
number is computed by hand in the comments from the generator's arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.helpers.event_log import TrainerLog
from training.telemetry.exits import WorkerExit
from training.telemetry.goodput import analyze, load_events, parse_event_lines


# --------------------------------------------------------------------------- A: one in-process recovery
def scenario_a() -> list[dict[str, Any]]:
    """Async checkpoints every 4 steps (stall 0.5, write 1.0), steps every 1.0 s (step_s 0.8) from t=1000."""
    log = TrainerLog(interval=4, stall_s=0.5, write_s=1.0)
    log.start()  # start x2 and restore at 1000.0
    # steps 1..4 at 1001..1004; save 4: begin 1004.0, staged 1004.5, committed 1005.5; steps 5..7 at 1005.5..1007.5
    log.steps(7)
    log.inject("exception", 1, dt=0.3)  # 1007.8, before step 8
    # restart_begin (detected 1008.0) and start at 1008.3; restore of step 4 and restart_end at 1008.8
    log.inprocess_restart("exception", from_step=4, detected_ts=1008.0, dt_start=0.5, dt_restore=0.5)
    log.steps(8)  # 5..8 at 1009.8..1012.8; save 8: staged 1013.3, committed 1014.3
    return log.finish(dt=0.2).sorted_events()  # exits at 1014.5


def test_scenario_a_goodput() -> None:
    a = analyze(scenario_a())
    assert a.wall_s == pytest.approx(14.5)
    assert a.final_step == 8
    # kept = the last execution of each step 1..8 = 8 x 0.8 = 6.4 s
    assert a.productive_s == pytest.approx(6.4)
    assert a.training_goodput == pytest.approx(6.4 / 14.5)
    # both ranks in the loop: [1000, 1007.8) until rank 1's fault, [1008.3, 1014.5) from the re-entry = 14.0
    assert a.working_intervals == [(1000.0, 1007.8), (1008.3, 1014.5)]
    assert a.infrastructure_goodput == pytest.approx(14.0 / 14.5)


def test_scenario_a_fault() -> None:
    a = analyze(scenario_a())
    (f,) = a.faults
    assert (f.kind, f.step, f.rank, f.layer, f.injected) == ("exception", 8, 1, "inprocess", True)
    # detection = detected_ts 1008.0 - 1007.8; restart = the workers started 1008.3; restore = first new step 1009.8
    assert f.detection_s == pytest.approx(0.2)
    assert f.restart_s == pytest.approx(0.3)
    assert f.restore_s == pytest.approx(1.5)
    assert f.recovery_s == pytest.approx(2.0)  # = 0.2 + 0.3 + 1.5
    # the fault fired before step 8: steps 5..7 were done and are redone (3 x 0.8); in flight 1007.8 - 1007.5
    assert (f.restored_step, f.rollback_steps) == (4, 3)
    assert f.rollback_s == pytest.approx(2.4)
    assert f.lost_work_s == pytest.approx(2.7)
    assert a.recovery_by_layer() == {"inprocess": {"p50": 2.0, "p95": 2.0, "max": 2.0, "n": 1}}
    # two ranks logged restart_begin for one restart
    assert a.restart_causes() == {
        "total": 1,
        "by_cause": {"exception": 1},
        "by_layer": {"inprocess": 1},
        "by_layer_and_cause": {"inprocess/exception": 1},
    }


def test_scenario_a_checkpoint_and_freshness() -> None:
    a = analyze(scenario_a())
    ck = a.checkpoint_summary()
    assert (ck["saves"], ck["mode"], ck["stall_s_mean"], ck["write_s_mean"], ck["backpressure_s"]) == (
        2, "async", 0.5, 1.0, 0.0,
    )  # fmt: skip
    # gaps: 2,3,4 -> 1.0; 5 -> 1.5 (the save); 6,7 -> 1.0; after the restore 6,7,8 -> 1.0 (5 follows the restore)
    # with checkpoints 9 gaps in 9.5 s: 0.947368 steps/s; without: 1.0 steps/s; efficiency 9 / 9.5
    assert ck["steps_per_s_with_checkpoints"] == pytest.approx(9 / 9.5, abs=1e-4)
    assert ck["steps_per_s_without_checkpoints"] == 1.0
    assert ck["efficiency"] == pytest.approx(9 / 9.5, abs=1e-4)
    assert ck["interval_s"] == pytest.approx(8.8)  # saves began at 1004.0 and 1012.8
    # freshness: run start 1000 -> commit 1005.5 -> commit 1014.3 -> end 1014.5: spans 5.5, 8.8, 0.2
    assert a.freshness_max_s == pytest.approx(8.8)
    assert a.freshness_mean_s == pytest.approx((5.5**2 + 8.8**2 + 0.2**2) / 2 / 14.5)
    assert not any("shorter than the write time" in w for w in a.warnings)


def test_a_failed_restore_is_not_a_failed_save() -> None:
    events = scenario_a()
    events.append({**events[-1], "event": "ckpt_failed", "ts": 1008.7, "step": 4, "error": "EIO", "op": "restore"})
    ck = analyze(events).checkpoint_summary()
    assert (ck["saves"], ck["failed"]) == (2, 0)


def test_scenario_a_to_json() -> None:
    j = analyze(scenario_a()).to_json()
    f = j["faults"][0]
    assert f["time_s"] == pytest.approx(7.8)  # relative to the first event
    assert (f["detection_s"], f["restart_s"], f["restore_s"], f["recovery_s"]) == (0.2, 0.3, 1.5, 2.0)
    assert (f["host"], f["pid"], f["cause_source"]) == ("node-0", 101, None)  # rank 1's process wrote it
    json.dumps(j)  # serialisable


# ----------------------------------------------------------- B: a worker killed from outside vs the same kill injected
def kill_run(inject: bool) -> TrainerLog:
    """ft_launcher restarts both workers after rank 1 died during step 8; checkpoints every 5 steps."""
    log = TrainerLog(interval=5, stall_s=0.1, write_s=0.5).launch()  # launch at 1000
    log.start(dt_start=2.0, dt_restore=0.5)  # start 1002.0, restore 1002.5
    log.steps(7)  # 1..7 at 1003.5..1009.6 (save 5: staged 1007.6, committed 1008.1)
    if inject:
        log.inject("sigkill", 1, dt=0.05)  # 1009.65
    log.exit(0, 14, "peer_lost", dt=0.4 - (0.05 if inject else 0.0))  # 1010.0: the survivor's collective failed
    log.launcher_restart("sigkill" if inject else "worker_failure", from_step=5, dt_start=3.0, dt_restore=1.0)
    # restart_begin and start 1013.0, restore 1014.0; steps 6..10 at 1015.0..1019.0; exits at 1020.0
    return log.steps(10).finish(dt=0.4)


def test_a_worker_that_stops_without_a_word_is_a_fault() -> None:
    log = kill_run(inject=False)
    line = "[2026-11-30 20:41:33,569] [ERROR] [ft_launcher9@node-0] failed (exitcode: -9) local_rank: 1 (pid: 101)"
    exits = [WorkerExit(101, -9, "node-0", f"launcher.log:153: {line}")]
    a = analyze(log.sorted_events(), exits)
    (f,) = a.faults
    # rank 1 (pid 101) wrote nothing after its start; the job's last step before the survivor's exit is 7 (1009.6)
    assert (f.kind, f.injected, f.rank, f.pid, f.step) == ("uninjected:sigkill", False, 1, 101, 8)
    assert f.ts == pytest.approx(1009.6)
    assert f.cause_source.startswith("launcher.log:153:")
    # detection: the exit 14 at 1010.0; restart: new workers at 1013.0; restore: first new step at 1015.0
    assert (f.detection_source, f.layer) == ("exit", "ft_launcher")
    assert f.detection_s == pytest.approx(0.4)
    assert f.restart_s == pytest.approx(3.0)
    assert f.restore_s == pytest.approx(2.0)
    assert f.recovery_s == pytest.approx(5.4)
    # steps 6, 7 redone: 2 x 0.8; nothing in flight at the last sign of life
    assert (f.restored_step, f.rollback_steps) == (5, 2)
    assert f.lost_work_s == pytest.approx(1.6)
    # working: [1002.0, 1009.6) until rank 1 went silent + [1013.0, 1020.0) = 14.6 of 20.0 s
    assert a.working_intervals == [(1002.0, pytest.approx(1009.6)), (1013.0, 1020.0)]
    assert a.infrastructure_goodput == pytest.approx(14.6 / 20.0)
    assert a.restart_causes()["by_layer_and_cause"] == {"ft_launcher/worker_failure": 1}


def test_the_killed_and_the_injected_worker_measure_alike() -> None:
    killed, injected = analyze(kill_run(False).sorted_events()), analyze(kill_run(True).sorted_events())
    (k,), (i,) = killed.faults, injected.faults
    assert (i.kind, i.injected, i.step) == ("sigkill", True, 8)
    # the injected fault is logged 0.05 s after the last step: every time is 0.05 s shorter, the working time longer
    assert i.detection_s == pytest.approx(k.detection_s - 0.05)
    assert i.recovery_s == pytest.approx(k.recovery_s - 0.05)
    assert (i.restart_s, i.restore_s) == (pytest.approx(k.restart_s), pytest.approx(k.restore_s))
    assert injected.infrastructure_goodput == pytest.approx(14.65 / 20.0)
    # without the launcher's log line the cause is unknown, and says so
    assert killed.faults[0].kind == "uninjected:silent_stop"


def test_a_host_that_goes_silent_is_a_lost_node() -> None:
    """Two pods, one rank each; pod node-1 vanishes, the job layer brings a new pod node-2."""
    log = TrainerLog(interval=5, hosts=("node-0", "node-1")).launch()
    log.start(dt_start=1.0).steps(3)  # 1002..1004
    log.exit(0, 14, "peer_lost", dt=0.5)  # 1004.5
    log.attempt, log.hosts = 1, ("node-0", "node-2")
    log.new_processes()
    log.start(restart=("job", "peer_lost"), dt_start=2.0).steps(5).finish()  # start 1006.5, steps at 1007.5..
    a = analyze(log.sorted_events())
    (f,) = a.faults
    assert (f.kind, f.rank, f.host, f.layer) == ("uninjected:node_lost", 1, "node-1", "job")
    assert f.ts == pytest.approx(1004.0) and f.detection_s == pytest.approx(0.5)
    assert "node-1 wrote no event" in f.cause_source
    assert a.hosts == ["node-0", "node-1", "node-2"]


def test_a_restart_nobody_injected_runs_from_the_last_step() -> None:
    log = TrainerLog(interval=2, layer="ft_launcher").launch()
    log.start().steps(3)  # 1001.0, 1002.0 (save 2, staged 1002.1), 1003.1
    # a real hang: ft_launcher's heartbeat timeout kills the group; the new workers log the restart at 1008.1
    log.restart += 1
    log.new_processes()
    log.start(restart=("ft_launcher", "heartbeat_timeout"), from_step=2, dt_start=5.0).steps(4).finish()
    (f,) = analyze(log.sorted_events()).faults
    # the old workers wrote no exit: they stopped silently; the fault runs from the last step (1003.1)
    assert (f.kind, f.injected, f.step, f.layer) == ("uninjected:silent_stop", False, 4, "ft_launcher")
    assert f.detection_s == pytest.approx(5.0)
    assert f.recovery_s == pytest.approx(6.0)  # first new step (3) at 1009.1
    assert (f.rollback_steps, f.rollback_s) == (1, pytest.approx(0.8))


def test_overlapping_faults_both_keep_their_layer() -> None:
    log = TrainerLog(interval=2).launch()
    log.start().steps(3)  # 1001.0, 1002.0 (save 2, staged 1002.1), 1003.1
    log.inject("exception", 1, dt=0.1).inject("exception", 0, dt=0.1)  # 1003.2, 1003.3: before any restart
    log.inprocess_restart("exception", from_step=2, dt_start=0.3).steps(5).finish()  # re-entry 1003.6
    fa, fb = analyze(log.sorted_events()).faults
    assert (fa.layer, fb.layer) == ("inprocess", "inprocess")
    assert fa.detection_s == pytest.approx(0.4) and fb.detection_s == pytest.approx(0.3)
    assert fa.recovered_ts == fb.recovered_ts == pytest.approx(1004.6)  # step 3 again


# ------------------------------------------------------------------- C: back-pressure: interval < write time
def scenario_backpressure() -> list[dict[str, Any]]:
    """Async saves every 2 steps that take 3.0 s to write, steps every 1.0 s, staging 0.1 s."""
    log = TrainerLog(interval=2, stall_s=0.1, write_s=3.0).start()
    # save 2 at 1002.0: no wait, staged 1002.1, written by 1005.1; steps 3, 4 at 1003.1, 1004.1
    # save 4 waits 1.0 s for it: staged 1005.2 (stall 1.1), written by 1008.2; steps 5, 6 at 1006.2, 1007.2
    # save 6 waits 1.0 s: staged 1008.3 (stall 1.1), written by 1011.3; exits at 1011.5
    return log.steps(6).finish(dt=0.2).sorted_events()


def test_backpressure_is_part_of_the_stall_and_of_the_efficiency() -> None:
    a = analyze(scenario_backpressure())
    ck = a.checkpoint_summary()
    assert ck["backpressure_s"] == pytest.approx(2.0)
    assert ck["stall_s_mean"] == pytest.approx((0.1 + 1.1 + 1.1) / 3, abs=1e-4)
    assert ck["stall_s_total"] == pytest.approx(2.3)
    # gaps 2: 1.0, 3: 1.1 (save), 4: 1.0, 5: 2.1 (save + wait), 6: 1.0 -> 5 steps in 6.2 s with, 1 step/s without
    assert ck["steps_per_s_with_checkpoints"] == pytest.approx(5 / 6.2, abs=1e-4)
    assert ck["efficiency"] == pytest.approx(5 / 6.2, abs=1e-4)
    # saves began at 1002.0, 1004.1, 1007.2: median interval 2.6 s < the 3.0 s write
    assert ck["interval_s"] == pytest.approx(2.6)
    (warning,) = [w for w in a.warnings if "shorter than the write time" in w]
    assert "interval 2.60 s" in warning and "3.00 s" in warning and "back-pressure 2.00 s" in warning
    # only step 2 ran with no write in flight: the speed without checkpoints comes from the save-free gaps, said so
    assert any(w.startswith("only 1 step gap(s) ran with no checkpoint write in flight") for w in a.warnings)


def test_steps_slowed_by_a_background_write_count_against_the_efficiency() -> None:
    log = TrainerLog(interval=4, stall_s=0.1, write_s=2.0).start()
    log.steps(4)  # 1001..1004; save 4: staged 1004.1, written by 1006.1
    log.step_gap = 1.5  # the write slows the steps it overlaps
    log.steps(6)  # 5 at 1005.6 (the save's gap: 1.6), 6 at 1007.1 (1.5, overlapping the write)
    log.step_gap = 1.0
    events = log.steps(8).finish().sorted_events()  # 7 at 1008.1, 8 at 1009.1: no write in flight
    ck = analyze(events).checkpoint_summary()
    # with: gaps 1, 1, 1, 1.6, 1.5, 1, 1 = 8.1 s for 7 steps; without: the 5 gaps with no save and no write, 1.0 s
    assert ck["step_s_with_checkpoints"] == pytest.approx(8.1 / 7, abs=1e-4)
    assert ck["steps_per_s_without_checkpoints"] == 1.0
    assert ck["efficiency"] == pytest.approx(7 / 8.1, abs=1e-4)


def test_gaps_inside_a_process_use_its_monotonic_clock() -> None:
    log = TrainerLog(step_s=None).start()
    events = log.steps(4).finish().sorted_events()  # steps at 1001..1004, mono 1..4
    (step3,) = [e for e in events if e["event"] == "step" and e["step"] == 3]
    step3["ts"] += 0.5  # the wall clock of the host jumped by 0.5 s (an NTP step) between steps 2 and 3
    a = analyze(events)
    assert [s.gap_s for s in a.steps] == [None, 1.0, 1.0, 1.0]


def test_no_faults_no_checkpoints_and_missing_step_s() -> None:
    log = TrainerLog(step_s=None).start()
    events = log.steps(5).finish(dt=0.5).sorted_events()  # steps at 1001..1005, exits at 1005.5
    a = analyze(events)
    # durations: steps 2..5 have gaps of 1.0; step 1 has neither step_s nor a gap -> median 1.0
    assert a.training_goodput == pytest.approx(5.0 / 5.5)
    assert a.infrastructure_goodput == pytest.approx(1.0)
    assert any("median step time" in w for w in a.warnings)
    assert a.faults == [] and a.recovery_by_layer() == {}
    ck = a.checkpoint_summary()
    assert ck["saves"] == 0 and ck["stall_s_mean"] is None and ck["backpressure_s"] is None
    assert ck["efficiency"] == pytest.approx(1.0)  # no checkpoint in any gap
    assert a.freshness_max_s == pytest.approx(5.5) and a.freshness_mean_s == pytest.approx(2.75)


def test_launch_event_starts_the_wall_clock_and_ranks_starting_apart_are_not_working() -> None:
    log = TrainerLog(step_s=None).launch()  # 1000.0
    log.wait(4.5).emit(1, "start", world_size=2, mode="inprocess-ft", device="cpu")  # rank 1 at 1004.5
    log.wait(1.0).emit(0, "start", world_size=2, mode="inprocess-ft", device="cpu")  # rank 0 at 1005.5
    log.emit(0, "restore", from_step=0, tier="none")
    log.steps(4).finish(dt=0.5)  # steps 1006.5..1009.5, exits 1010.0
    a = analyze(log.sorted_events())
    # wall 10.0; working only once both ranks entered: [1005.5, 1010.0) = 4.5
    assert a.wall_s == pytest.approx(10.0)
    assert a.working_intervals == [(1005.5, 1010.0)]
    assert a.infrastructure_goodput == pytest.approx(0.45)


def test_unrecovered_fault() -> None:
    log = TrainerLog().start()
    log.steps(2).inject("hang", 0, dt=0.5)  # 1002.5; the run ends there
    a = analyze(log.sorted_events())
    (f,) = a.faults
    assert f.detection_s is None and f.recovery_s is None and f.layer is None
    assert a.recovery_by_layer() == {}
    assert a.infrastructure_goodput == pytest.approx(1.0)  # [1000, 1002.5) of a 2.5 s run
    assert any("no exit event" in w for w in a.warnings)


# --------------------------------------------------------------------------- robustness
def test_torn_and_malformed_lines(tmp_path) -> None:
    good = [json.dumps(e) for e in scenario_a()]
    lines = [*good[:5], '{"ts": 4.05, "event": "st', '{"event": "step"}', "[1, 2]", "", *good[5:], '{"ts": 99, "ev']
    (tmp_path / "events.jsonl").write_text("\n".join(lines))
    loaded = load_events(tmp_path)
    assert (loaded.torn_lines, loaded.malformed) == (2, 2)
    assert len(loaded.events) == len(good)
    assert analyze(loaded.events).training_goodput == pytest.approx(6.4 / 14.5)


def test_out_of_order_lines_are_sorted() -> None:
    lines = [json.dumps(e) for e in reversed(scenario_a())]
    assert analyze(parse_event_lines(lines).events).wall_s == pytest.approx(14.5)


def test_empty_log_does_not_crash() -> None:
    a = analyze([])
    j = a.to_json()
    assert j["training_goodput"] is None and j["final_step"] is None
    assert "empty" in j["warnings"][0]


def test_steps_only_log() -> None:
    log = TrainerLog(step_s=1.0)
    events = [e for e in log.steps(3).sorted_events()]  # rank 0's steps at 1001..1003, nothing else
    a = analyze(events)
    assert a.infrastructure_goodput is None
    assert any("infrastructure goodput cannot be measured" in w for w in a.warnings)
    # wall = 1003 - 1001; step 1 ends at the first event, so none of its 1.0 s lies inside the run
    assert a.productive_s == pytest.approx(2.0)
    assert a.training_goodput == pytest.approx(1.0)


def test_step_event_without_step_number_is_ignored() -> None:
    log = TrainerLog().start()
    log.wait(1.0).emit(0, "step", step_s=1.0)
    events = log.steps(1).finish().sorted_events()
    a = analyze(events)
    assert len(a.steps) == 1
    assert any("without an integer 'step'" in w for w in a.warnings)


# --------------------------------------------------------------------------- restarts across pods
def _restart(ts: float, rank: int, layer: str, cause: str, pod: int, *, restart: int, attempt: int, it: int) -> dict:
    counters = {"restart": restart, "attempt": attempt, "relaunch": 0, "iteration": it}
    where = {"host": f"train-{pod}", "pid": 100 * pod + rank}
    return {"ts": ts, "rank": rank, "layer": layer, "event": "restart_begin", "cause": cause, **where, **counters}


def test_one_restart_of_ranks_in_two_pods_is_one_whatever_each_pod_s_counters_say() -> None:
    """``make demo``'s cluster run (2 pods x 2 workers; restart_begin events as it logged them): pod 1 is lost and
    replaced (its ranks 2-3 restart in the job layer, attempt 1), pod 0's ranks 0-1 restart under ft_launcher (its
    restart 1); later one exception restarts all four ranks in-process, pod 0 at (restart 1, attempt 0) and pod 1 at
    (restart 0, attempt 1). Three restarts, not four: the in-process one was counted once per pod."""
    events = [
        _restart(26.28, 0, "ft_launcher", "node-loss", 0, restart=1, attempt=0, it=0),
        _restart(26.29, 3, "job", "node-loss", 1, restart=0, attempt=1, it=0),
        _restart(26.29, 2, "job", "node-loss", 1, restart=0, attempt=1, it=0),
        _restart(26.29, 1, "ft_launcher", "node-loss", 0, restart=1, attempt=0, it=0),
        {"ts": 30.0, "rank": 0, "layer": "ft_launcher", "event": "step", "step": 21, "step_s": 0.1},
        *[
            _restart(36.18 + 0.01 * r, r, "inprocess", "exception", r // 2, restart=1 - r // 2, attempt=r // 2, it=1)
            for r in (0, 1, 3, 2)
        ],
    ]
    assert analyze(events).restart_causes() == {
        "total": 3,
        "by_cause": {"exception": 1, "node-loss": 2},
        "by_layer": {"ft_launcher": 1, "inprocess": 1, "job": 1},
        "by_layer_and_cause": {"ft_launcher/node-loss": 1, "inprocess/exception": 1, "job/node-loss": 1},
    }


def test_a_rank_that_restarts_again_before_any_step_begins_another_restart() -> None:
    """A fault during the restore: both ranks restart in-process twice (iterations 1 and 2) with no step between."""
    events = [
        _restart(t, r, "inprocess", "exception", 0, restart=0, attempt=0, it=it)
        for it, t in ((1, 10.0), (2, 12.0))
        for r in (0, 1)
    ]
    assert analyze(events).restart_causes()["by_layer_and_cause"] == {"inprocess/exception": 2}


def test_a_fault_injected_between_two_pods_restarts_separates_them() -> None:
    """Pod 1 lost and its ranks restarted by the job layer; pod 0 lost before any step, its ranks restarted too: two
    restarts, one per lost node, though no step came between them."""
    lost = {"event": "fault_injected", "kind": "node-loss", "rank": -1, "layer": "job"}
    events = [
        {**lost, "ts": 10.0, "pod": 1},
        *[_restart(12.0, r, "job", "node-loss", 1, restart=0, attempt=1, it=0) for r in (2, 3)],
        {**lost, "ts": 12.5, "pod": 0},
        *[_restart(14.0, r, "job", "node-loss", 0, restart=0, attempt=1, it=0) for r in (0, 1)],
    ]
    assert analyze(events).restart_causes()["by_layer_and_cause"] == {"job/node-loss": 2}


@pytest.mark.parametrize(
    ("phase", "logged_late", "rollback"), [("step", True, 3), ("step", False, 3), ("eval", False, 4)]
)
def test_the_rollback_counts_from_the_step_the_fault_s_phase_says_was_done(
    phase: str, logged_late: bool, rollback: int
) -> None:
    """Issue 48, item 8: the report's phase rule. A fault in phase ``step`` at step 8 fires before step 8, when every
    rank had finished step 7, even if rank 0 logs step 7 a moment after the fault; one in phase ``eval`` at step 8
    fires after step 8. Restored step 4: 3 steps (5-7) or 4 steps (5-8) are trained again."""
    log = TrainerLog(interval=4, stall_s=0.1, write_s=0.5)
    log.start()
    log.steps(6 if logged_late else 7)
    if phase == "step":
        log.wait(0.3).emit(1, "fault_injected", kind="exception", step=8, fault_rank=1, phase="step")
        log.steps(7)  # rank 0's log of step 7, 1 s after the fault when ``logged_late`` (no-op otherwise)
    else:
        log.steps(8).wait(0.3).emit(1, "fault_injected", kind="exception", step=8, fault_rank=1, phase="eval")
    log.inprocess_restart("exception", from_step=4, dt_start=0.5, dt_restore=0.5)
    log.steps(10)
    (f,) = analyze(log.finish(dt=0.2).sorted_events()).faults
    assert (f.phase, f.step, f.restored_step, f.rollback_steps) == (phase, 8, 4, rollback)


def test_memory_snapshots_count_in_the_loop_s_overhead() -> None:
    """The memory tier's snapshots are part of the checkpoint cost: rank 0's published snapshots (a failed one and
    other ranks' are not), the auto interval's last decision, and the stalls in the overhead of the wall time."""
    events = scenario_a()
    base = analyze(events).checkpoint_summary()
    mem = [
        {**events[-1], "event": "mem_snapshot", "rank": 0, "step": 3, "stall_s": 0.02},
        {**events[-1], "event": "mem_snapshot", "rank": 0, "step": 6, "stall_s": 0.04},
        {**events[-1], "event": "mem_snapshot", "rank": 1, "step": 6, "stall_s": 0.9, "error": "ENOSPC"},
        {**events[-1], "event": "mem_snapshot", "rank": 0, "step": 7, "stall_s": 0.0, "error": "ENOSPC"},
        {**events[-1], "event": "mem_interval", "rank": 0, "step": 4, "interval": 3, "cost_s": 0.03, "step_s": 1.0},
    ]
    a = analyze(events[:-1] + mem + events[-1:])
    ck = a.checkpoint_summary()
    assert (ck["memory_snapshots"], ck["memory_stall_s_total"], ck["memory_interval_steps"]) == (2, 0.06, 3)
    assert ck["memory_stall_s_p50"] == pytest.approx(0.03)
    # scenario A: 1.0 s of save stalls in 14.5 s of wall time; with the snapshots 1.06 s
    assert (base["overhead_fraction_of_wall"], ck["overhead_fraction_of_wall"]) == (
        pytest.approx(1.0 / 14.5, abs=1e-4),
        pytest.approx(1.06 / 14.5, abs=1e-4),
    )
