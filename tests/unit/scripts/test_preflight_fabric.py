"""make preflight's fabric check: the two nccl-tests pods, the mpirun line, and the verdict on an all_reduce_perf log.

``preflight/all_reduce_perf.log`` has the format nccl-tests v2.19.6 prints (src/util.cu, src/common.cu) and the NCCL
INFO line of ``Using network``; it was written for these tests (no EFA machine here), its bandwidths invented.
"""

from __future__ import annotations

from pathlib import Path

import kubernetes_validate
import pytest

from platform_config import config_from_dict, load_config
from scripts import preflight_fabric as fabric

LOG = (Path(__file__).parent / "preflight" / "all_reduce_perf.log").read_text()


def test_parse_reads_both_bandwidth_columns_of_every_size() -> None:
    rows = fabric.parse_all_reduce(LOG)
    assert [r.size_bytes for r in rows] == [8, 1048576, 1073741824, 17179869184]
    assert (rows[-1].busbw_out, rows[-1].busbw_in, rows[-1].busbw, rows[-1].wrong) == (290.92, 291.01, 291.01, 0)


def test_a_healthy_run_passes_against_the_instance_table() -> None:
    cfg = load_config()
    assert cfg.instance.expected_allreduce_busbw_gbs == 240.0  # 3200 Gbit/s = 400 GB/s x 0.6
    results = {name: (good, detail) for name, good, detail in fabric.fabric_results(cfg, LOG)}
    assert results["fabric:network"] == (True, "NCCL used AWS Libfabric; expected AWS Libfabric")
    assert results["fabric:correctness"][0]
    good, detail = results["fabric:busbw"]
    assert good and detail.startswith("291.01 GB/s at 17179869184 bytes across 2 x p5.48xlarge (expected >= 240")


def test_slow_wrong_or_socket_runs_fail_with_the_reason() -> None:
    cfg = load_config()
    slow = LOG.replace("290.92", "90.92").replace("291.01", "91.01")
    assert dict((n, g) for n, g, _ in fabric.fabric_results(cfg, slow))["fabric:busbw"] is False
    wrong = LOG.replace("291.01       0", "291.01       3").replace("values : 0 OK", "values : 3 FAILED")
    assert dict((n, g) for n, g, _ in fabric.fabric_results(cfg, wrong))["fabric:correctness"] is False
    sockets = LOG.replace("Using network AWS Libfabric", "Using network Socket")
    (network,) = [r for r in fabric.fabric_results(cfg, sockets) if r[0] == "fabric:network"]
    assert network == ("fabric:network", False, "NCCL used Socket; expected AWS Libfabric")
    crashed = fabric.fabric_results(cfg, "NCCL WARN NET/OFI Failed to initialize\nmpirun noticed ... exited\n")
    assert crashed[-1][0:2] == ("fabric:all_reduce", False) and "mpirun noticed" in crashed[-1][2]


def test_p4de_expects_its_own_line_rate() -> None:
    assert (
        config_from_dict({"gpu_nodes": {"instance_type": "p4de.24xlarge"}}).instance.expected_allreduce_busbw_gbs
        == 30.0
    )


def test_mpirun_forces_the_ofi_plugin_and_runs_one_rank_per_gpu_on_each_node() -> None:
    cfg = load_config()
    argv = fabric.mpirun_argv(cfg, "10.0.32.7")
    assert argv[:6] == [fabric.MPIRUN, "--allow-run-as-root", "-np", "16", "--host", "localhost:8,10.0.32.7:8"]
    assert argv[argv.index("plm_rsh_agent") + 1] == "python3 /opt/image/rsh.py"
    forwarded = {argv[i + 1] for i, a in enumerate(argv) if a == "-x"}
    assert {"NCCL_NET", "FI_PROVIDER", "FI_EFA_USE_DEVICE_RDMA", "LD_LIBRARY_PATH", "PATH"} <= forwarded
    assert "RSH_TOKEN" not in forwarded
    tail = argv[argv.index(fabric.ALL_REDUCE_PERF) :]
    assert " ".join(tail) == "/opt/nccl-tests/all_reduce_perf -b 8 -e 16G -f 2 -g 1 -c 1 -n 50 -w 5"


@pytest.mark.parametrize("index", [0, 1])
def test_pods_take_a_whole_gpu_node_like_a_training_pod_and_validate(index: int) -> None:
    cfg = load_config()
    pod = fabric.fabric_pod(cfg, "img", index, "tok", peer="10.0.32.7" if index == 0 else None)
    (c,) = pod["spec"]["containers"]
    whole_node = {"cpu": "184", "memory": "1900Gi", "nvidia.com/gpu": "8", "vpc.amazonaws.com/efa": "32"}
    assert c["resources"]["limits"] == {**whole_node, "hugepages-2Mi": "5120Mi"} == c["resources"]["requests"]
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    env = {e["name"]: e["value"] for e in c["env"]}
    assert (env["NCCL_NET"], env["FI_PROVIDER"], env["RSH_TOKEN"]) == ("AWS Libfabric", "efa", "tok")
    assert c["command"][:2] == (["python3", "/opt/image/rsh.py"] if index else [fabric.MPIRUN, "--allow-run-as-root"])
    affinity = pod["spec"]["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][0]
    assert affinity["topologyKey"] == "kubernetes.io/hostname"  # two different nodes
    kubernetes_validate.validate(pod, f"{cfg.cluster.kubernetes_version}.0", strict=True)


def test_the_launcher_pod_needs_the_peer() -> None:
    with pytest.raises(ValueError, match="needs pod 1's address"):
        fabric.fabric_pod(load_config(), "img", 0, "tok")


def test_run_fabric_starts_the_agent_then_mpirun_with_its_address_and_always_cleans_up(monkeypatch) -> None:
    """kubectl scripted: pod 1 runs at 10.0.32.7, pod 0 succeeds with the recorded log; both pods are deleted."""
    import json
    import subprocess

    from scripts import preflight as pf

    calls: list[list[str]] = []
    applied: list[dict] = []

    def run_command(argv: list[str], stdin: str | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
        calls.append(argv)
        if argv[:2] == ["kubectl", "apply"]:
            applied.append(json.loads(stdin or "{}"))
        out = LOG if argv[-2:] == ["logs", f"{fabric.NAME}-0"] else ""
        return subprocess.CompletedProcess(argv, 0, out, "")

    def wait_pod(ns: str, name: str, phases: tuple[str, ...], timeout_s: int) -> dict:
        return {"status": {"phase": "Running" if name.endswith("-1") else "Succeeded", "podIP": "10.0.32.7"}}

    monkeypatch.setattr(pf, "run_command", run_command)
    monkeypatch.setattr(pf, "wait_pod", wait_pod)
    results = pf.run_fabric(load_config(), "img")
    assert [(r.name, r.status) for r in results] == [
        ("fabric:network", "ok"), ("fabric:correctness", "ok"), ("fabric:busbw", "ok")
    ]  # fmt: skip
    assert [p["metadata"]["name"] for p in applied] == ["preflight-nccl-1", "preflight-nccl-0"]
    launcher = applied[1]["spec"]["containers"][0]["command"]
    assert "localhost:8,10.0.32.7:8" in launcher
    tokens = [{e["name"]: e["value"] for e in p["spec"]["containers"][0]["env"]}["RSH_TOKEN"] for p in applied]
    assert len(tokens[0]) == 32 and tokens[0] == tokens[1]  # a fresh random secret, shared by the two pods
    deletes = [c[5] for c in calls if c[3:4] == ["delete"]]
    assert deletes[-2:] == ["preflight-nccl-0", "preflight-nccl-1"]  # the finally block, whatever happened
