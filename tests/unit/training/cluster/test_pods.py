"""What a pod's container gets: the downward API, JOB_COMPLETION_INDEX, $(VAR) expansion, and its volumes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from training.cluster.controller import PodRun
from training.cluster.image import LocalImage
from training.cluster.manifest import Container, EnvVar, JobManifest, ManifestError, Volume, VolumeMount
from training.cluster.pods import Storage, container_env, driver_mounts, field_value, gpu_slice, volume_mounts
from training.cluster.sandbox import Mount

IMAGE = LocalImage("/workspace", {"PYTHONPATH": "/workspace"})


def job(env=(), mounts=(), volumes=None, gpus=0):
    return JobManifest(
        name="train",
        namespace="training",
        completions=2,
        parallelism=2,
        backoff_limit=6,
        backoff_limit_per_index=3,
        max_failed_indexes=0,
        pod_replacement_policy="Failed",
        rules=[],
        container=Container("trainer", "img", ["bash"], list(env), list(mounts), gpus=gpus),
        volumes=volumes or {},
        subdomain="train",
        termination_grace_s=30,
        labels={"app": "x"},
    )


POD = PodRun(index=1, name="train-1-abcde", failures=2, ignored=1, created_at=0.0, node="node-7")


def test_downward_api_values():
    j = job()
    assert field_value("metadata.name", j, POD, "10.0.0.9") == "train-1-abcde"
    assert field_value("spec.nodeName", j, POD, "10.0.0.9") == "node-7"
    assert field_value("metadata.annotations['batch.kubernetes.io/job-index-failure-count']", j, POD, "") == "2"
    assert field_value("metadata.annotations['batch.kubernetes.io/job-index-ignored-failure-count']", j, POD, "") == "1"
    assert field_value("metadata.annotations['absent']", j, POD, "") == ""
    assert field_value("metadata.labels['batch.kubernetes.io/job-completion-index']", j, POD, "") == "1"
    assert field_value("metadata.labels['app']", j, POD, "") == "x"
    with pytest.raises(ManifestError, match="not supported"):
        field_value("status.phase", j, POD, "")


def test_each_pod_index_gets_its_own_gpus_on_a_gpu_host():
    assert gpu_slice(0, 4, 8) == "0,1,2,3" and gpu_slice(1, 4, 8) == "4,5,6,7"
    assert gpu_slice(1, 1, 2) == "1"
    assert gpu_slice(1, 4, 0) is None  # no GPU here: CPU workers
    assert gpu_slice(0, 0, 8) is None  # a container that asks for none (the dataset Job)
    with pytest.raises(ManifestError, match=re.escape("pod index 1 needs GPUs 1..1 (1 a pod) but this host has 1")):
        gpu_slice(1, 1, 1)
    env = container_env(job(gpus=1), POD, "10.0.0.9", "train-1", IMAGE, host_gpus=2)
    assert env["CUDA_VISIBLE_DEVICES"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in container_env(job(gpus=1), POD, "10.0.0.9", "train-1", IMAGE)


def test_a_gpu_pod_gets_the_host_driver_libraries_after_the_image_s_library_path():
    """As the NVIDIA container toolkit does: without them a host whose driver lives off the default library path
    ran its "GPU" pods on the CPU (2 x H200, 2026-12-04: `no CUDA` in every pod, NVML not found)."""
    image = LocalImage("/workspace", {"LD_LIBRARY_PATH": "/opt/amazon/efa/lib"})
    args = (job(gpus=1), POD, "10.0.0.9", "train-1")
    env = container_env(*args, image, host_gpus=2, driver_dir="/usr/local/nvidia/lib64")
    assert env["LD_LIBRARY_PATH"] == "/opt/amazon/efa/lib:/usr/local/nvidia/lib64"
    assert container_env(*args, IMAGE, host_gpus=2, driver_dir="/drv")["LD_LIBRARY_PATH"] == "/drv"
    # no GPUs for the pod: the image's path as it is
    assert container_env(*args, image, driver_dir="/drv")["LD_LIBRARY_PATH"] == "/opt/amazon/efa/lib"
    assert "LD_LIBRARY_PATH" not in container_env(job(gpus=0), POD, "10.0.0.9", "train-1", IMAGE, 2, "/drv")
    # ... and the directory itself: the pod's root (an overlay of the host's root file system) lacks other mounts
    assert driver_mounts(job(gpus=1), 2, "/usr/local/nvidia/lib64") == [
        Mount("/usr/local/nvidia/lib64", "bind", Path("/usr/local/nvidia/lib64"), read_only=True)
    ]
    assert driver_mounts(job(gpus=0), 2, "/drv") == driver_mounts(job(gpus=1), 0, "/drv") == []
    assert driver_mounts(job(gpus=1), 2, None) == []


def test_container_env_order_and_expansion(monkeypatch):
    monkeypatch.delenv("PYTHONPATH", raising=False)
    env = [
        EnvVar("HOST_IP", field_path="status.hostIP"),
        EnvVar("ENDPOINT", value="udp://$(HOST_IP):25888"),
        EnvVar("LATER", value="$(UNDEFINED)-$(ENDPOINT)"),
    ]
    got = container_env(job(env), POD, "10.0.0.9", "train-1", IMAGE)
    assert got["HOSTNAME"] == "train-1" and got["JOB_COMPLETION_INDEX"] == "1"
    assert got["ENDPOINT"] == "udp://10.0.0.9:25888"
    assert got["LATER"] == "$(UNDEFINED)-udp://10.0.0.9:25888"  # Kubernetes leaves unknown references as they are
    assert got["PYTHONPATH"] == "/workspace"


def test_volumes_become_mounts_in_order(tmp_path):
    volumes = {
        "config": Volume("config", "configMap", ref="cfg"),
        "fsx": Volume("fsx", "persistentVolumeClaim", ref="claim"),
        "shm": Volume("shm", "emptyDir", medium="Memory", size_limit="1Gi"),
    }
    mounts = [VolumeMount("config", "/etc/training", True), VolumeMount("fsx", "/ckpt"), VolumeMount("shm", "/dev/shm")]
    storage = Storage({"claim": tmp_path / "claim"}, {"cfg": tmp_path / "cm"}, (("/ckpt/runs/x", tmp_path / "run"),))
    got = volume_mounts(job(mounts=mounts, volumes=volumes), storage, IMAGE)
    assert [(m.target, m.kind, m.source, m.read_only, m.size_bytes) for m in got] == [
        ("/etc/training", "bind", tmp_path / "cm", True, 0),
        ("/ckpt", "bind", tmp_path / "claim", False, 0),
        ("/dev/shm", "tmpfs", None, False, 1 << 30),
        ("/ckpt/runs/x", "bind", tmp_path / "run", False, 0),
    ]
    with pytest.raises(ManifestError, match="ConfigMap 'cfg' is not among"):
        volume_mounts(job(mounts=mounts, volumes=volumes), Storage(storage.claims, {}), IMAGE)


def test_a_mount_of_a_missing_volume_is_refused():
    with pytest.raises(ManifestError, match="names no volume"):
        volume_mounts(job(mounts=[VolumeMount("nope", "/x")]), Storage({}, {}), LocalImage("/", {}, [(Path("/"), "/")]))
