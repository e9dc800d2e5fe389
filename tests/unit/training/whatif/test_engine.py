"""The simulation: closed forms without faults, hand-computed timelines with faults, and agreement with the
report's own goodput math (``training.telemetry.goodput.analyze``) on the event logs the engine writes."""

from __future__ import annotations

import itertools
from collections import Counter

import pytest

from training.telemetry.goodput import analyze
from training.whatif.engine import MAX_RECORDED_STEPS, WATERFALL_KEYS, run_trials, simulate
from training.whatif.params import Dist, FaultClass, LayerParams, Scenario

EXC = FaultClass("exception", {"inprocess": 0.0, "ft_launcher": 0.0, "job": 0.0})


def layers(inprocess: float = 3.0, ft: float = 8.0, job: float = 10.0, **kw: object) -> dict[str, LayerParams]:
    return {
        "inprocess": LayerParams(Dist(inprocess), **kw),  # type: ignore[arg-type]
        "ft_launcher": LayerParams(Dist(ft), **kw),  # type: ignore[arg-type]
        "job": LayerParams(Dist(job), **kw),  # type: ignore[arg-type]
    }


# --------------------------------------------------------------------------------- no faults: closed forms
def test_async_back_pressure_timeline_by_hand() -> None:
    # K=10 steps of 1 s, stall 2, write 15 (longer than the 10 s of compute between saves):
    # 0-10 compute, 10-12 stall (write until 27), 12-22 compute, 22-27 wait, 27-29 stall (write until 44),
    # 29-39 compute, 39-44 wait, 44-46 stall (write until 61), 46-61 close() waits for the last write.
    sc = Scenario(steps=30, step_s=1.0, interval=10, stall_s=2.0, write_s=15.0).validate()
    t = simulate(sc)
    assert t.wall_s == pytest.approx(61.0)
    assert t.waterfall["productive"] == 30.0
    assert t.waterfall["stall"] == pytest.approx(6.0)
    assert t.waterfall["back_pressure"] == pytest.approx(25.0)  # 5 + 5 + 15
    assert t.training_goodput == pytest.approx(30 / 61)
    assert t.saves == 3


def test_sync_saves_stall_for_the_write() -> None:
    # each save blocks 2 + 15 s: 30 + 3 x 17 = 81
    sc = Scenario(steps=30, step_s=1.0, interval=10, stall_s=2.0, write_s=15.0, checkpoint_mode="sync").validate()
    t = simulate(sc)
    assert t.wall_s == pytest.approx(81.0)
    assert t.waterfall["stall"] == pytest.approx(51.0) and t.waterfall["back_pressure"] == 0.0


@pytest.mark.parametrize(
    ("k", "t", "delta", "w", "mode"),
    [(100, 0.2, 1.0, 5.0, "async"), (100, 0.2, 1.0, 30.0, "async"), (50, 1.0, 4.0, 20.0, "sync")],
)
def test_goodput_without_faults_is_the_closed_form(k: int, t: float, delta: float, w: float, mode: str) -> None:
    """K·t / (δ + max(K·t, w)) asynchronous, K·t / (K·t + δ + w) synchronous, up to one cycle of end effects."""
    n = 2000
    sc = Scenario(steps=n * k, step_s=t, interval=k, stall_s=delta, write_s=w, checkpoint_mode=mode).validate()
    closed = k * t / (delta + max(k * t, w)) if mode == "async" else k * t / (k * t + delta + w)
    assert simulate(sc).training_goodput == pytest.approx(closed, abs=1.5 / n)


def test_the_issue_examples_20_21_and_20_31() -> None:
    # 100 steps x 0.2 s = 20 s of compute per save, 1 s stall: a 5 s write hides behind the compute (20/21);
    # a 30 s write makes every save wait 10 s for the previous one (20/31).
    base = {"steps": 10000, "step_s": 0.2, "interval": 100, "stall_s": 1.0, "node_mtbf_hours": 1e9}
    assert simulate(Scenario(**base, write_s=5.0).validate()).training_goodput == pytest.approx(20 / 21, abs=0.005)
    assert simulate(Scenario(**base, write_s=30.0).validate()).training_goodput == pytest.approx(20 / 31, abs=0.005)


def test_first_save_of_a_process_has_its_own_stall() -> None:
    sc = Scenario(steps=30, step_s=1.0, interval=10, stall_s=1.0, first_stall_s=5.0, write_s=0.0).validate()
    assert simulate(sc).waterfall["stall"] == pytest.approx(5.0 + 1.0 + 1.0)


# --------------------------------------------------------------------------------- faults: timelines by hand
def scheduled(mode: str, **kw: object) -> Scenario:
    """20 steps of 1 s, async save every 10 (stall 0.5, write 2), start-up 5, restore 2, one exception at step 15."""
    base = dict(steps=20, step_s=1.0, interval=10, stall_s=0.5, write_s=2.0, startup_s=5.0, restore_s=Dist(2.0),
                mode=mode, fault_classes=(EXC,), fault_schedule=((15, "exception"),), layers=layers())  # fmt: skip
    return Scenario(**(base | kw)).validate()  # type: ignore[arg-type]


def test_in_process_recovery_by_hand() -> None:
    # 0-5 start-up; steps 1-10 end at 15; stall to 15.5 (write commits at 17.5); steps 11-14 end at 19.5;
    # the fault at the start of step 15 (19.5); restart 3 -> 22.5; restore step 10 for 2 s -> 24.5;
    # steps 11-20 -> 34.5; stall -> 35; the last write -> 37.
    t = simulate(scheduled("inprocess"))
    assert t.wall_s == pytest.approx(37.0)
    w = t.waterfall
    assert (w["productive"], w["rework"], w["restore"], w["down_inprocess"], w["startup"]) == pytest.approx(
        (20.0, 4.0, 2.0, 3.0, 5.0)
    )  # rework: steps 11-14 thrown away
    assert (w["stall"], w["back_pressure"]) == pytest.approx((1.0, 2.0))
    assert sum(w.values()) == pytest.approx(t.wall_s)
    assert t.training_goodput == pytest.approx(20 / 37)
    assert t.infrastructure_goodput == pytest.approx((37 - 5 - 3) / 37)
    assert t.reference_infrastructure_goodput == pytest.approx(1 - (3 + 2) / 37)  # down + restore, not start-up
    (f,) = t.faults
    assert (f.step, f.layer, f.rolled_back_to, f.lost_s, f.down_s, f.restore_s) == (15, "inprocess", 10, 4.0, 3.0, 2.0)


def test_kubernetes_recovery_by_hand() -> None:
    # the same fault, only the job layer, and k8s-only's synchronous saves (stall 0.5 + write 2 = 2.5 each):
    # 0-5 start-up; steps 1-10 end at 15; save -> 17.5; steps 11-14 end at 21.5 (the fault); restart 10 -> 31.5,
    # new pods start up 5 -> 36.5, restore -> 38.5, steps 11-20 -> 48.5, the last save -> 51;
    # down: 10 (job) + 5 + 5 (start-ups)
    t = simulate(scheduled("k8s-only"))
    assert t.wall_s == pytest.approx(51.0)
    assert t.waterfall["down_job"] == pytest.approx(10.0) and t.waterfall["startup"] == pytest.approx(10.0)
    assert t.infrastructure_goodput == pytest.approx((51 - 10 - 10) / 51)
    assert t.faults[0].down_s == pytest.approx(15.0)


def test_spent_budgets_escalate_then_resubmit() -> None:
    # in-process may restart once: the second fault goes to ft_launcher; with every budget at 0 the job is resubmitted
    two = ((5, "exception"), (15, "exception"))
    sc = scheduled("inprocess-ft", fault_schedule=two, layers=layers(budget=1))
    assert [f.layer for f in simulate(sc).faults] == ["inprocess", "ft_launcher"]
    gone = scheduled("inprocess-ft", layers=layers(budget=0), resubmit_s=100.0)
    t = simulate(gone)
    assert t.faults[0].layer == "resubmit"
    assert t.waterfall["down_resubmit"] == pytest.approx(100.0)
    assert t.wall_s == pytest.approx(37.0 - 3.0 + 100.0 + 5.0)  # resubmission and a new start-up instead of 3 s


def test_the_job_budget_counts_per_node_and_not_lost_nodes() -> None:
    three = ((5, "exception"), (12, "exception"), (18, "exception"))
    one_node = simulate(scheduled("k8s-only", fault_schedule=three, layers=layers(budget=1), resubmit_s=100.0))
    assert [f.layer for f in one_node.faults] == ["job", "resubmit", "job"]  # the 2nd failure of node 0 fails the Job
    # 1,000 nodes: the three faults hit three different nodes (seeded), each within its own budget of one
    many = simulate(scheduled("k8s-only", fault_schedule=three, layers=layers(budget=1), nodes=1000))
    assert [f.layer for f in many.faults] == ["job", "job", "job"]
    loss = FaultClass("node_loss", {"job": 0.0}, node_loss=True)
    lost = ((5, "node_loss"), (12, "node_loss"))
    ignored = simulate(scheduled("k8s-only", fault_classes=(loss,), fault_schedule=lost, layers=layers(budget=0)))
    assert [f.layer for f in ignored.faults] == ["job", "job"]  # podFailurePolicy: DisruptionTarget -> Ignore


def test_a_gpu_fault_on_a_ready_node_is_counted_and_waits_for_another_node() -> None:
    gpu = FaultClass("gpu_fault", {"job": 0.0}, ready_node=True)
    two = ((5, "gpu_fault"), (12, "gpu_fault"))
    kw = {"fault_classes": (gpu,), "fault_schedule": two, "layers": layers(budget=1), "resubmit_s": 100.0}
    counted = simulate(scheduled("k8s-only", node_replace_s=0.0, **kw))
    assert [f.layer for f in counted.faults] == ["job", "resubmit"]  # counted: the 2nd one on node 0 fails the Job
    spare = FaultClass("gpu_fault", {"job": 0.0}, ready_node=True)
    one = {"fault_classes": (spare,), "fault_schedule": ((15, "gpu_fault"),), "node_replace_s": 600.0}
    without, with_spare = (
        simulate(scheduled("inprocess-ft", **one)),
        simulate(scheduled("inprocess-ft", spares=1, **one)),
    )
    assert without.wall_s - with_spare.wall_s == pytest.approx(600.0)  # the fenced node is not used again


def test_a_failed_attempt_escalates_to_the_next_layer() -> None:
    sc = scheduled("inprocess-ft", layers=layers(fail_p=1.0))  # every attempt fails while a layer above exists
    (f,) = simulate(sc).faults
    assert f.layers_tried == ["inprocess", "ft_launcher", "job"] and f.layer == "job"
    assert f.down_s == pytest.approx(3.0 + 8.0 + 10.0 + 5.0)  # every attempt, then the new pod's start-up


def test_a_spare_node_saves_the_replacement_wait() -> None:
    loss = FaultClass("node_loss", {"job": 50.0}, node_loss=True)
    kw = {"fault_classes": (loss,), "fault_schedule": ((15, "node_loss"),), "node_replace_s": 600.0}
    without, with_spare = simulate(scheduled("inprocess-ft", **kw)), simulate(scheduled("inprocess-ft", spares=1, **kw))
    assert without.faults[0].layer == "job" and without.faults[0].detection_s == 50.0
    assert without.wall_s - with_spare.wall_s == pytest.approx(600.0)


def test_the_memory_tier_serves_process_restarts_but_not_a_lost_node() -> None:
    # memory copies every 2 steps: the fault at step 15 rolls back to 14 in-process, but to 10 on a new node
    mem = {"memory_interval": 2, "memory_stall_s": 0.1, "memory_restore_s": 0.5}
    assert simulate(scheduled("inprocess", **mem)).faults[0].rolled_back_to == 14
    loss = FaultClass("node_loss", {"job": 0.0}, node_loss=True)
    t = simulate(scheduled("inprocess", fault_classes=(loss,), fault_schedule=((15, "node_loss"),), **mem))
    assert t.faults[0].rolled_back_to == 10


def test_peer_copies_serve_a_lost_node_from_memory_when_there_is_another_node() -> None:
    # the same lost node with each snapshot also held on another node: back to 14 from the peer's copy; with one
    # node there is no other node to hold it, so back to storage's 10
    mem = {"memory_interval": 2, "memory_stall_s": 0.1, "memory_restore_s": 0.5, "memory_peer_copies": True}
    loss = FaultClass("node_loss", {"job": 0.0}, node_loss=True)
    kw = {"fault_classes": (loss,), "fault_schedule": ((15, "node_loss"),), "node_replace_s": 0.0} | mem
    assert simulate(scheduled("inprocess", nodes=2, **kw)).faults[0].rolled_back_to == 14
    assert simulate(scheduled("inprocess", nodes=1, **kw)).faults[0].rolled_back_to == 10


def test_the_published_baseline_restores_from_storage_whatever_the_memory_interval() -> None:
    # the lost node at step 15 of test_peer_copies_...: sync-ckpt (the same layers, with the memory tier) comes back
    # to 14 from a peer's copy, k8s-only (no memory tier, as training runs it) to storage's 10, with no snapshot stall
    mem = {"memory_interval": 2, "memory_stall_s": 0.1, "memory_restore_s": 0.5, "memory_peer_copies": True}
    loss = FaultClass("node_loss", {"job": 0.0}, node_loss=True)
    kw = {"fault_classes": (loss,), "fault_schedule": ((15, "node_loss"),), "node_replace_s": 0.0, "nodes": 2} | mem
    assert simulate(scheduled("sync-ckpt", **kw)).faults[0].rolled_back_to == 14
    baseline = simulate(scheduled("k8s-only", **kw))
    assert baseline.faults[0].rolled_back_to == 10
    assert baseline.wall_s == simulate(scheduled("k8s-only", **(kw | {"memory_interval": 0}))).wall_s


# --------------------------------------------------------------------------------- random faults
def stochastic(mode: str, seed: int, **kw: object) -> Scenario:
    base = dict(steps=400, step_s=0.5, interval=40, stall_s=1.0, first_stall_s=4.0, write_s=30.0, startup_s=20.0,
                nodes=4, node_mtbf_hours=0.2, mode=mode, seed=seed, restore_s=Dist(5.0, 9.0), spares=1,
                layers=layers(budget=1, fail_p=0.5), fault_schedule=((100, "exception"), (101, "hang")),
                resubmit_s=100.0)  # fmt: skip
    return Scenario(**(base | kw)).validate()  # type: ignore[arg-type]


MODES = ("inprocess-ft", "inprocess", "ft-launcher", "k8s-only")


@pytest.mark.parametrize(("mode", "ckpt", "memory"), list(itertools.product(MODES, ("async", "sync"), (0, 10))))
def test_the_engine_agrees_with_the_reports_analysis(mode: str, ckpt: str, memory: int) -> None:
    """Validation 2: the coalesced event log of a trial gives the trial's own figures through ``analyze()``."""
    for seed in range(3):
        trial = simulate(stochastic(mode, seed, checkpoint_mode=ckpt, memory_interval=memory, memory_stall_s=0.3,
                                    memory_restore_s=1.0), record=True)  # fmt: skip
        assert trial.events is not None and len(trial.faults) >= 2 and trial.finished
        a = analyze(trial.events)
        assert a.wall_s == pytest.approx(trial.wall_s, abs=1e-6)
        assert a.training_goodput == pytest.approx(trial.training_goodput, abs=1e-6)
        assert a.infrastructure_goodput == pytest.approx(trial.infrastructure_goodput, abs=1e-6)
        assert a.productive_s == pytest.approx(trial.productive_s, abs=1e-6)
        assert len(a.faults) == len(trial.faults)
        for mine, theirs in zip(trial.faults, a.faults, strict=True):
            assert theirs.detection_s == pytest.approx(mine.detection_s, abs=1e-6)
            assert theirs.layer == ("job" if mine.layer == "resubmit" else mine.layer)
            assert theirs.restored_step == mine.rolled_back_to


def test_the_cross_check_covers_escalation_and_resubmission() -> None:
    tried = Counter()
    for mode, ckpt, memory, seed in itertools.product(MODES, ("async", "sync"), (0, 10), range(3)):
        sc = stochastic(mode, seed, checkpoint_mode=ckpt, memory_interval=memory, memory_stall_s=0.3)
        tried.update(tuple(f.layers_tried) for f in simulate(sc).faults)
    assert tried[("inprocess", "ft_launcher")] and tried[("inprocess", "job")] and tried[("ft_launcher", "job")]
    assert tried[("resubmit",)] and tried[("job",)] > tried[("inprocess",)]  # node losses dominate the default mix


def test_recovery_time_as_the_report_measures_it() -> None:
    # fault -> first new step = down + restore + one step, when no second fault interrupts the recovery
    trial = simulate(stochastic("inprocess-ft", 0, node_mtbf_hours=None), record=True)
    a = analyze(trial.events or [])
    for mine, theirs in zip(trial.faults, a.faults, strict=True):
        assert theirs.recovery_s == pytest.approx(mine.down_s + mine.restore_s + 0.5, abs=1e-6)


@pytest.mark.parametrize("mode", MODES)
def test_components_sum_to_the_wall_time(mode: str) -> None:
    for seed in range(5):
        t = simulate(stochastic(mode, seed))
        assert set(t.waterfall) == set(WATERFALL_KEYS)
        assert sum(t.waterfall.values()) == pytest.approx(t.wall_s, rel=1e-12)


def test_fast_forward_gives_the_same_trial_as_walking_every_cycle() -> None:
    for mode, seed, ckpt in itertools.product(("inprocess-ft", "k8s-only"), range(5), ("async", "sync")):
        sc = stochastic(mode, seed, steps=5000, interval=20, node_mtbf_hours=2.0, checkpoint_mode=ckpt)
        fast, slow = simulate(sc, fast=True), simulate(sc, fast=False)
        assert fast.wall_s == pytest.approx(slow.wall_s, abs=1e-9)
        assert fast.saves == slow.saves and len(fast.faults) == len(slow.faults)


def test_trials_are_seeded() -> None:
    sc = stochastic("inprocess-ft", 7)
    assert simulate(sc, 3).wall_s == simulate(sc, 3).wall_s
    assert len({round(simulate(sc, i).wall_s, 6) for i in range(5)}) > 1


def test_summary_percentiles_and_lost_gpu_hours() -> None:
    s = run_trials(scheduled("inprocess", nodes=2, gpus_per_node=8), trials=3)  # deterministic: 3 equal trials
    assert s.training_goodput == {"p5": 20 / 37, "p50": 20 / 37, "p95": 20 / 37, "mean": pytest.approx(20 / 37)}
    assert s.lost_gpu_hours["p50"] == pytest.approx((37 - 20) * 16 / 3600)
    assert s.recovered_by() == {"inprocess": 3}
    assert sum(s.waterfall_s.values()) == pytest.approx(37.0)


def test_a_job_that_cannot_finish_gives_up() -> None:
    # no checkpoint and a fault every ~90 s of work in a 10,000 s run: every fault starts it over
    sc = stochastic("inprocess", 0, steps=20000, interval=0, fault_schedule=(), node_mtbf_hours=0.1)
    t = simulate(sc, record=True)
    assert not t.finished and t.wall_s >= 20 * 20000 * 0.5 and len(t.faults) >= 20
    assert t.training_goodput < 0.05
    assert sum(t.waterfall.values()) == pytest.approx(t.wall_s)
    assert t.events is not None and t.events[-1]["reason"] == "gave_up"
    assert run_trials(sc, trials=2).unfinished == 2


def test_recording_refuses_huge_runs() -> None:
    with pytest.raises(ValueError, match="--events: the event log has one line per step"):
        simulate(Scenario(steps=MAX_RECORDED_STEPS + 1, step_s=1.0).validate(), record=True)
