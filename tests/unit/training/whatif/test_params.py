"""The planner's inputs: distributions, fault rates, derived times and the errors that name the field."""

from __future__ import annotations

import numpy as np
import pytest

from platform_config import ProjectConfig
from training.whatif.params import (
    LLAMA3_NODE_MTBF_HOURS,
    Dist,
    FaultClass,
    Scenario,
    ScenarioError,
    default_fault_classes,
)


def test_a_lognormal_through_p50_and_p95_has_those_percentiles() -> None:
    d = Dist(10.0, 25.0)
    xs = np.array([d.sample(np.random.default_rng(i)) for i in range(20000)])
    assert np.percentile(xs, 50) == pytest.approx(10.0, rel=0.03)
    assert np.percentile(xs, 95) == pytest.approx(25.0, rel=0.05)
    assert Dist(4.0).sample(np.random.default_rng(0)) == 4.0  # no p95: a constant
    assert Dist(4.0, 4.0).mean == 4.0


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"p50": 5, "p95": 3}, "p95 must be >= p50"),
        ({"p5": 1}, "needs keys p50"),
        ("ten", "could not convert"),
        (-1, "p50 must be a finite number >= 0"),
    ],
)
def test_bad_distributions_name_the_field(value: object, message: str) -> None:
    with pytest.raises(ScenarioError, match=message) as err:
        Dist.of(value, "restore_s")
    assert "restore_s" in str(err.value) or "p50" in str(err.value)


def test_llama3_node_mtbf() -> None:
    # 16,384 GPUs / 8 = 2,048 nodes; 54 days = 1,296 h; 2,654,208 node-hours / 419 interruptions
    assert round(LLAMA3_NODE_MTBF_HOURS, 2) == 6334.63


def test_default_fault_mix_and_timeouts_come_from_the_table_and_the_config() -> None:
    exception, hang, gpu_fault, node_loss = default_fault_classes(ProjectConfig())
    shares = exception.share + hang.share + gpu_fault.share + node_loss.share
    assert shares == pytest.approx(1.0)  # 56 + 42 + 268 + 53 = 419
    assert (gpu_fault.share, node_loss.share) == (pytest.approx(268 / 419), pytest.approx(53 / 419))
    assert hang.detection_s == {"inprocess": 20.0, "ft_launcher": 60.0, "job": 600.0}  # soft timeout, heartbeat, NCCL
    assert node_loss.first_layer == "job" and exception.first_layer == "inprocess"
    # a lost node: its pod deleted after the EKS timeline's measured 47.2 s, not counted, on another node
    assert (node_loss.detection_s, node_loss.node_loss, node_loss.needs_node) == ({"job": 47.2}, True, True)
    # a GPU fault on a Ready node: the pod fails at once, counted, and its replacement needs another node
    assert (gpu_fault.detection_s, gpu_fault.node_loss, gpu_fault.needs_node) == ({"job": 0.0}, False, True)


def test_fault_rates_scale_with_nodes_and_gpus() -> None:
    per_gpu = FaultClass("gpu_xid", {"ft_launcher": 0.0}, rate_per_hour=0.001, per="gpu")
    sc = Scenario(step_s=1.0, nodes=2, gpus_per_node=8, fault_classes=(per_gpu,)).validate()
    assert sc.class_rates_per_s() == [pytest.approx(0.016 / 3600)]  # 0.001 x 16 GPUs per hour
    big = Scenario(step_s=1.0, nodes=64, node_mtbf_hours=LLAMA3_NODE_MTBF_HOURS).validate()
    assert big.cluster_mtbf_s / 3600 == pytest.approx(6334.63 / 64, rel=1e-5)  # 98.98 h
    assert Scenario(step_s=1.0).validate().cluster_mtbf_s == float("inf")  # no MTBF, no explicit rates


@pytest.mark.parametrize(
    ("mode", "layers", "ckpt"),
    [
        ("inprocess", ("inprocess", "job"), "async"),
        ("ft-launcher", ("ft_launcher", "job"), "async"),
        ("inprocess-ft", ("inprocess", "ft_launcher", "job"), "async"),
        ("k8s-only", ("job",), "sync"),  # the published baseline: no NVRx, synchronous torch DCP saves
        ("sync-ckpt", ("job",), "sync"),
    ],
)
def test_modes_turn_on_layers(mode: str, layers: tuple[str, ...], ckpt: str) -> None:
    sc = Scenario(step_s=1.0, mode=mode).validate()
    assert sc.layers_on == layers and sc.ckpt_mode == ckpt
    assert Scenario(step_s=1.0, mode=mode, checkpoint_mode="sync").validate().ckpt_mode == "sync"


def test_step_time_by_nodes_interpolates_in_log2_nodes() -> None:
    sc = Scenario(step_s_by_nodes={2: 0.4, 8: 0.5}, nodes=4).validate()
    assert sc.step_time == pytest.approx(0.45)  # log2(4) = 2 is half way between 1 and 3
    assert sc.with_(nodes=16).step_time == pytest.approx(0.55)  # one more doubling past 8 adds 0.05
    assert Scenario(step_s_by_nodes={8: 0.5}, nodes=64).validate().step_time == 0.5


def test_write_and_restore_times_from_checkpoint_bytes_and_fsx_throughput() -> None:
    # 8.03 B params x 12 bytes = 96.36 GB; SCRATCH_2 1200 GiB: 200 MB/s/TiB x 1200/1024 TiB = 234.375 MB/s
    sc = Scenario(step_s=1.0, model_params_b=8.03, verify_s=3.0, reinit_s=7.0).validate()
    assert sc.storage_mbps == pytest.approx(234.375)
    assert sc.write_time == pytest.approx(96.36e9 / 234.375e6)  # 411.1 s
    assert sc.restore_dist.p50 == pytest.approx(96.36e9 / 234.375e6 + 10.0)
    # two nodes of 100 MB/s each are the bottleneck below the file system's 234 MB/s
    assert sc.with_(nodes=2, node_mbps=100.0).write_time == pytest.approx(96.36e9 / 200e6)
    assert sc.with_(write_s=5.0).write_time == 5.0  # a measured write wins
    assert Scenario(step_s=1.0).validate().write_time == 0.0  # nothing known: free


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"steps": 0}, "steps: must be a whole number >= 1"),
        ({"step_s": None}, "step_s: give the step time"),
        ({"step_s": -1.0}, "step_s: must be > 0"),
        ({"mode": "bogus"}, "mode: must be one of sync-ckpt, async-ckpt, inprocess, ft-launcher, inprocess-ft, k8s"),
        ({"checkpoint_mode": "lazy"}, "checkpoint_mode: must be async or sync"),
        ({"stall_s": -0.5}, "stall_s: must be a number >= 0"),
        ({"node_mtbf_hours": 0.0}, "node_mtbf_hours: must be > 0"),
        (
            {"fault_schedule": ((5, "meteor"),)},
            "fault_schedule: meteor@5 needs a class among exception, hang, gpu_fault, node",
        ),
        ({"fault_schedule": ((0, "hang"),)}, "and 1 <= step <= 1000"),
    ],
)
def test_validation_names_the_field(changes: dict, message: str) -> None:
    base = {"step_s": 1.0}
    with pytest.raises(ScenarioError, match=message.replace("(", r"\(")):
        Scenario(**(base | changes)).validate()


def test_fault_class_errors() -> None:
    with pytest.raises(ScenarioError, match="detection_s needs layers among inprocess, ft_launcher, job"):
        FaultClass("x", {"kubelet": 1.0})
    with pytest.raises(ScenarioError, match="per must be node or gpu"):
        FaultClass("x", {"job": 1.0}, per="rack")


def test_to_json_shows_the_derived_inputs() -> None:
    j = Scenario(step_s=0.2, interval=100, write_s=5.0, nodes=64, node_mtbf_hours=6400.0).validate().to_json()
    assert j["derived"]["cluster_mtbf_hours"] == pytest.approx(100.0)
    assert j["derived"]["layers_on"] == ["inprocess", "ft_launcher", "job"]
    assert j["layers"]["job"]["restart"] == {"p50": 270.0, "p95": 405.0}
    assert [c["name"] for c in j["fault_classes"]] == ["exception", "hang", "gpu_fault", "node_loss"]
