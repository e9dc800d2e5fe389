"""The local cluster's manifests: synthesized once (``--synth-only``) and run elsewhere (``--manifests``), on a host
without cdk8s, only when they were synthesized from the same config."""

from __future__ import annotations

from pathlib import Path

import pytest

from platform_config import RecoveryMode, load_config
from tests.helpers.training_runs import python_stdout
from training.cluster.runner import ClusterOptions, local_cluster_config
from training.local import parse_args

#: Runs :func:`training.cluster.runner.prepare_manifests` with cdk8s, jsii and constructs unimportable (a host
#: without Node, such as the GPU image) and prints the Job names, or the refusal.
PREBUILT_SCRIPT = """
import builtins, sys
from pathlib import Path
real_import = builtins.__import__
def no_jsii(name, *args, **kwargs):
    if name.split(".")[0] in ("cdk8s", "cdk8s_plus_36", "jsii", "constructs"):
        raise ImportError("no cdk8s on this host: " + name)
    return real_import(name, *args, **kwargs)
builtins.__import__ = no_jsii
from platform_config import RecoveryMode, load_config
from training.cluster.manifest import ManifestError
from training.cluster.runner import ClusterOptions, prepare_manifests
run_dir, manifests, faults, version = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
opts = ClusterOptions(run_dir=run_dir, nodes=2, nproc=2, steps=140, mode=RecoveryMode("inprocess-ft"), faults=faults,
                      nvrx_version=version, manifests=manifests)
try:
    _, loaded, where = prepare_manifests(load_config(None, None), opts)
    print("loaded", where == run_dir / ".cluster" / "manifests", sorted(loaded.jobs))
except ManifestError as err:
    print("refused:", err)
"""


def test_synthesized_manifests_run_without_cdk8s_only_for_their_own_config(tmp_path: Path) -> None:
    faults = "node-loss@40:1,exception@70:2"
    synth = tmp_path / "synth"
    cluster = ("--nodes", "2", "--nproc", "2", "--steps", "140", "--faults", faults)
    out = python_stdout(
        ["-m", "training.local", "--run-dir", str(synth), *cluster, "--nvrx-version", "0.7.0", "--synth-only"], 120
    )
    manifests = synth / ".cluster" / "manifests"
    assert f"== manifests: {manifests} ==" in out
    assert not (synth / "job.json").exists()  # nothing ran

    same = python_stdout(["-c", PREBUILT_SCRIPT, str(tmp_path / "run"), str(manifests), faults, "0.7.0"], 60)
    assert same.strip() == (
        "loaded True ['fsdp-train-async-ckpt', 'fsdp-train-ft-launcher', 'fsdp-train-inprocess', "
        "'fsdp-train-inprocess-ft', 'fsdp-train-k8s-only', 'fsdp-train-prepare-data', 'fsdp-train-sync-ckpt']"
    )
    # Another NVRx (other ft_launcher flags) or another in-pod fault schedule is another config.
    for other_faults, version in ((faults, "0.4.1"), ("node-loss@40:1", "0.7.0")):
        refused = python_stdout(
            ["-c", PREBUILT_SCRIPT, str(tmp_path / "run"), str(manifests), other_faults, version], 60
        )
        assert refused.startswith(f"refused: --manifests {manifests} were synthesized from another config")
        assert "they hold fsdp-train-config-" in refused


def test_manifests_for_a_gpu_host_carry_its_scaled_local_timeouts(tmp_path: Path) -> None:
    """``--host-gpus N`` (with ``--synth-only``): the config of a host with GPUs whatever this one has, so manifests
    synthesized here (Node.js for cdk8s) run on a GPU host without it. The local timeouts there are the CPU ones
    x ``local.cuda_timeout_scale`` (2.5): soft 4 -> 10 s, heartbeat 6 -> 15 s, the checkpoint group's gloo 3 -> 7.5 s.
    """
    cfg = load_config(None, None)

    def inprocess(gpus: int) -> tuple[float, float, float]:
        opts = ClusterOptions(tmp_path, nodes=2, nproc=1, steps=40, mode=RecoveryMode("inprocess-ft"), host_gpus=gpus)
        ip = local_cluster_config(cfg, opts, "").inprocess
        return ip.soft_timeout_s, ip.heartbeat_timeout_s, ip.gloo_timeout_s

    assert inprocess(2) == (10.0, 15.0, 7.5)
    assert inprocess(0) == (4.0, 6.0, 3.0)
    for argv in (["--run-dir", "r", "--host-gpus", "2"], ["--run-dir", "r", "--nodes", "2", "--host-gpus", "2"]):
        with pytest.raises(SystemExit):  # a run uses this host's GPUs: only a synthesis may name another host's
            parse_args(argv)
    assert parse_args(["--run-dir", "r", "--nodes", "2", "--synth-only", "--host-gpus", "2"]).host_gpus == 2
