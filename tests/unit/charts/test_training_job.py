"""The training Job: Kubernetes semantics, and properties over node counts 1..64 x GPUs per node 1..8."""

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from charts import launch_command as lc
from charts.names import TRAINER_CONTAINER, rendezvous_host, service_name
from charts.pod_resources import resource_quantities
from charts.topology import Topology
from platform_config import MODE_LAYERS, RecoveryMode
from tests.unit.charts.conftest import make_cfg, synth_job, trainer


def test_indexed_job_outer_layer(cfg):
    spec = synth_job(cfg, RecoveryMode.INPROCESS_FT)["spec"]
    n = cfg.gpu_nodes.node_count
    assert spec["completionMode"] == "Indexed"
    assert spec["completions"] == spec["parallelism"] == n
    assert spec["backoffLimitPerIndex"] == cfg.job.backoff_limit
    assert spec["maxFailedIndexes"] == 0
    assert spec["backoffLimit"] == cfg.job.backoff_limit * n
    assert spec["podReplacementPolicy"] == "Failed"
    assert spec["ttlSecondsAfterFinished"] == cfg.job.ttl_seconds_after_finished
    assert spec["template"]["spec"]["restartPolicy"] == "Never"


def test_pod_failure_policy_fails_job_on_unretryable_codes_and_ignores_disruption(cfg):
    rules = synth_job(cfg, RecoveryMode.K8S_ONLY)["spec"]["podFailurePolicy"]["rules"]
    assert rules[0] == {
        "action": "FailJob",
        "onExitCodes": {
            "containerName": TRAINER_CONTAINER,
            "operator": "In",
            # unrecoverable (retries exhausted / repeated fault), config error, no usable checkpoint,
            # checkpoint root missing although the run committed
            "values": sorted({cfg.ft.unrecoverable_exit_code, 2, 20, 22}),
        },
    }
    assert rules[1] == {"action": "Ignore", "onPodConditions": [{"type": "DisruptionTarget", "status": "True"}]}
    assert len(rules) == 2


def test_pod_dns_storage_and_security(cfg):
    mode = RecoveryMode.FT_LAUNCHER
    pod = synth_job(cfg, mode)["spec"]["template"]["spec"]
    c = trainer({"spec": {"template": {"spec": pod}}})
    assert pod["subdomain"] == service_name(cfg)
    assert pod["serviceAccountName"] == cfg.job.service_account
    mounts = {m["name"]: m["mountPath"] for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert mounts["fsx"] == cfg.storage.mount_path == "/checkpoints"
    assert volumes["fsx"]["persistentVolumeClaim"]["claimName"] == cfg.storage.pvc_name
    assert mounts["dshm"] == "/dev/shm"
    assert volumes["dshm"]["emptyDir"] == {"medium": "Memory", "sizeLimit": f"{cfg.job.shm_size_gib}Gi"}
    assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}  # Pod Security baseline: nothing added
    env = {e["name"]: e for e in c["env"]}
    assert env["NVRX_INPROCESS_STORE_PORT"]["value"] == str(cfg.job.inprocess_store_port)
    assert "NVRX_INPROCESS_STORE_HOST" not in env  # NVRx never read it (its store host is MASTER_ADDR)
    assert env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"]["value"] == "1"
    assert env["JOB_INDEX_FAILURES"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-index-failure-count']"
    )
    assert env["JOB_INDEX_IGNORED_FAILURES"]["valueFrom"]["fieldRef"]["fieldPath"] == (
        "metadata.annotations['batch.kubernetes.io/job-index-ignored-failure-count']"
    )
    assert "JOB_ATTEMPT" not in env  # the supervisor adds the two counts
    assert c["command"][:2] == ["bash", "-c"]
    assert "AWS_EMF_AGENT_ENDPOINT" not in env  # CloudWatch metrics are off by default


def test_emf_metrics_point_pods_at_their_nodes_cloudwatch_agent():
    cfg = make_cfg(observability={"emf_metrics": True})
    env = {e["name"]: e for e in trainer(synth_job(cfg, RecoveryMode.INPROCESS_FT))["env"]}
    assert env["HOST_IP"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.hostIP"
    assert env["AWS_EMF_AGENT_ENDPOINT"]["value"] == "udp://$(HOST_IP):25888"


def test_old_kubernetes_is_rejected():
    # The configuration itself refuses anything below 1.32; model_copy skips validation to reach the Job's own guard.
    base = make_cfg()
    cfg = base.model_copy(update={"cluster": base.cluster.model_copy(update={"kubernetes_version": "1.28"})})
    with pytest.raises(ValueError, match=r">= 1\.29"):
        synth_job(cfg, RecoveryMode.SYNC_CKPT)


@settings(max_examples=25, derandomize=True, deadline=None)
@given(
    nodes=st.integers(min_value=1, max_value=64),
    gpus=st.integers(min_value=1, max_value=8),
    mode=st.sampled_from(list(RecoveryMode)),
)
def test_ranks_world_size_rendezvous_and_resources_stay_consistent(nodes, gpus, mode):
    cfg = make_cfg(gpu_nodes={"node_count": nodes, "max_nodes": max(nodes, 2)})
    instance = dataclasses.replace(cfg.instance, gpus=gpus)
    topo = Topology.from_config(cfg, instance)
    assert topo.world_size == nodes * gpus
    job = synth_job(cfg, mode, topo)
    spec = job["spec"]
    assert spec["completions"] == spec["parallelism"] == nodes
    c = trainer(job)
    limits = c["resources"]["limits"]
    assert c["resources"]["requests"] == limits == resource_quantities(instance)
    assert limits["nvidia.com/gpu"] == str(gpus)

    argv = lc.launch_argv(cfg, mode, topo)
    script = c["command"][2]
    assert lc.shell_join(lc.supervised_launch(cfg, argv)) in script
    flags = dict(zip(argv[1::2], argv[2::2], strict=False))
    assert int(flags["--nnodes"]) * int(flags["--nproc-per-node"]) == nodes * gpus
    host = rendezvous_host(cfg, mode)
    assert host == f"{job['metadata']['name']}-0.{service_name(cfg)}"
    assert flags["--rdzv-backend"] == "c10d"  # every launcher: round-scoped rendezvous hosted by index 0
    assert flags["--rdzv-endpoint"] == f"{host}:{cfg.job.rendezvous_port}"
    assert flags["--rdzv-conf"].startswith(f"is_host={lc.IS_HOST},")
    assert flags["--max-restarts"] == (str(cfg.ft.max_restarts) if MODE_LAYERS[mode].ft_launcher else "0")
    # every pod gets a distinct, valid DNS label <job>-<index>; index 0's is the rendezvous host
    hostnames = [f"{job['metadata']['name']}-{i}" for i in range(nodes)]
    assert len(set(hostnames)) == nodes and all(len(h) <= 63 for h in hostnames)
    assert host.split(".")[0] == hostnames[0]
