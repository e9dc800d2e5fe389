"""The GPU node user data: labels/taints API, the NodeConfig, and a golden file of what boots a node."""

from __future__ import annotations

import email

import yaml

from platform_config import config_from_dict, load_config
from stacks.gpu_user_data import (
    EFA_PRESENT_LABEL,
    MEMLOCK_DROPIN,
    ClusterConnection,
    boothook,
    gpu_node_labels,
    gpu_node_taints,
    gpu_node_tolerations,
    mime_user_data,
    node_config,
)
from tests.helpers.stack_synth import Synthesized
from tests.unit.stacks.conftest import check_golden, only

CONN = ClusterConnection(name="c", endpoint="https://x", certificate_authority="Q0E=", service_cidr="172.20.0.0/16")


def render_intrinsics(value: object) -> str:
    """A resolved ``Fn::Base64(Fn::Join)`` user data as readable text; references appear as ``{{...}}``."""
    if isinstance(value, str):
        return value
    assert isinstance(value, dict) and len(value) == 1, value
    ((fn, arg),) = value.items()
    if fn == "Fn::Base64":
        return render_intrinsics(arg)
    if fn == "Fn::Join":
        return arg[0].join(render_intrinsics(v) for v in arg[1])
    if fn == "Ref":
        return "{{Ref " + arg + "}}"
    if fn == "Fn::GetAtt":
        return "{{GetAtt " + ".".join(arg) + "}}"
    if fn == "Fn::GetStackOutput":
        return "{{StackOutput " + arg["StackName"] + "." + arg["OutputName"] + "}}"
    raise AssertionError(f"unexpected intrinsic {fn}")


def rendered_user_data(env: Synthesized) -> str:
    lt = only(env.template_json(env.platform.gpu), "AWS::EC2::LaunchTemplate")
    return render_intrinsics(lt["Properties"]["LaunchTemplateData"]["UserData"])


def test_labels_are_config_labels_plus_efa_present() -> None:
    cfg = load_config(env="default")
    labels = gpu_node_labels(cfg)
    assert labels == {**cfg.gpu_nodes.node_labels, EFA_PRESENT_LABEL: "true"}
    other = config_from_dict({"gpu_nodes": {"node_labels": {"team": "ml"}}})
    assert gpu_node_labels(other) == {"team": "ml", EFA_PRESENT_LABEL: "true"}


def test_taints_and_tolerations_come_from_config() -> None:
    assert gpu_node_taints(load_config()) == ["nvidia.com/gpu=true:NoSchedule"]
    assert gpu_node_tolerations(load_config()) == [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
    ]
    cfg = config_from_dict({"gpu_nodes": {"node_taints": ["a/b:NoExecute", "c=d:NoSchedule"]}})
    assert gpu_node_tolerations(cfg) == [
        {"key": "a/b", "operator": "Exists", "effect": "NoExecute"},
        {"key": "c", "operator": "Exists", "effect": "NoSchedule"},
    ]
    kubelet = node_config(cfg, CONN)["spec"]["kubelet"]
    assert kubelet["config"] == {
        "registerWithTaints": [
            {"key": "a/b", "effect": "NoExecute"},
            {"key": "c", "value": "d", "effect": "NoSchedule"},
        ]
    }
    assert not any("taints" in f for f in kubelet["flags"])  # the deprecated kubelet flag is gone
    untainted = config_from_dict({"gpu_nodes": {"node_taints": []}})
    assert "config" not in node_config(untainted, CONN)["spec"]["kubelet"]


def test_mime_document_carries_the_hugepages_boothook_then_one_nodeconfig_part() -> None:
    cfg = load_config()
    msg = email.message_from_string(mime_user_data(cfg, CONN))
    assert msg.is_multipart()
    parts = [p for p in msg.walk() if not p.is_multipart()]
    assert [p.get_content_type() for p in parts] == ["text/cloud-boothook", "application/node.eks.aws"]
    assert parts[0].get_payload() == boothook(cfg)
    doc = yaml.safe_load(parts[1].get_payload())
    assert doc == node_config(cfg, CONN)
    spec = doc["spec"]
    assert spec["cluster"] == {
        "name": "c",
        "apiServerEndpoint": "https://x",
        "certificateAuthority": "Q0E=",
        "cidr": "172.20.0.0/16",
    }
    assert spec["instance"]["localStorage"]["strategy"] == "RAID0"
    flags = spec["kubelet"]["flags"]
    labels = ",".join(f"{k}={v}" for k, v in gpu_node_labels(cfg).items())
    assert flags == [f"--node-labels={labels}"]
    assert spec["kubelet"]["config"] == {
        "registerWithTaints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NoSchedule"}]
    }


def test_user_data_in_template_references_the_cluster(default_env: Synthesized) -> None:
    text = rendered_user_data(default_env)
    doc = yaml.safe_load(email.message_from_string(text).get_payload()[1].get_payload())
    cluster = doc["spec"]["cluster"]
    # the GPU stack reads them from the cluster stack's outputs (Fn::GetStackOutput)
    prefix = "{{StackOutput " + default_env.platform.cluster.stack_name + ".PublishOutputFnGetAttEksCluster"
    assert cluster["apiServerEndpoint"].startswith(prefix) and "Endpoint" in cluster["apiServerEndpoint"]
    assert (
        cluster["certificateAuthority"].startswith(prefix)
        and "CertificateAuthorityData" in cluster["certificateAuthority"]
    )
    assert cluster["cidr"] == default_env.cfg.cluster.service_ipv4_cidr


def test_user_data_golden(any_env: Synthesized) -> None:
    env_name = "prod" if any_env.cfg.network.vpc_id else "default"
    check_golden(f"gpu_user_data.{env_name}.txt", rendered_user_data(any_env))


def test_boothook_reserves_the_instance_tables_hugepages_before_the_kubelet() -> None:
    hook = boothook(load_config())
    assert hook.startswith("#cloud-boothook\n#!/bin/bash\n")
    assert "want=5128\n" in hook  # p5.48xlarge: the EFA installer's 5128 pages, >= the pod's 5120Mi (2560 pages)
    assert 'sysctl -w vm.nr_hugepages="$want"' in hook
    assert f"printf '[Service]\\nLimitMEMLOCK=infinity\\n' > {MEMLOCK_DROPIN}\n" in hook
    p4 = boothook(config_from_dict({"gpu_nodes": {"instance_type": "p4de.24xlarge"}}))
    assert "want=5128\n" in p4


def test_boothook_lifts_memlock_and_raises_never_lowers_and_fails_when_short(tmp_path) -> None:
    """The script itself, run by bash against a fake /proc and sysctl: 5200 pages stay, 100 are raised, a kernel
    that reserves only 3000 fails the boot."""
    import subprocess

    hook = boothook(load_config())
    for have, granted, rc, final in ((5200, None, 0, 5200), (100, 5128, 0, 5128), (100, 3000, 1, 3000)):
        nr = tmp_path / "nr_hugepages"
        nr.write_text(f"{have}\n")
        dropin = tmp_path / "containerd.service.d" / "memlock.conf"
        script = hook.replace("/proc/sys/vm/nr_hugepages", str(nr)).replace(MEMLOCK_DROPIN, str(dropin))
        script = script.replace(MEMLOCK_DROPIN.rsplit("/", 1)[0], str(dropin.parent))
        fake = tmp_path / "sysctl"
        fake.write_text(f"#!/bin/bash\necho {granted} > {nr}\n")
        fake.chmod(0o755)
        done = subprocess.run(
            ["bash", "-c", script], capture_output=True, text=True, env={"PATH": f"{tmp_path}:/usr/bin:/bin"}
        )
        assert (done.returncode, int(nr.read_text())) == (rc, final), done.stderr
        assert dropin.read_text() == "[Service]\nLimitMEMLOCK=infinity\n"
