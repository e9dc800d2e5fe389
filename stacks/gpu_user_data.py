"""User data of the self-managed GPU nodes: a nodeadm ``NodeConfig`` in a MIME multipart document.

AL2023 EKS AMIs boot with ``nodeadm``, which reads ``application/node.eks.aws`` parts of the user
data. The document names the cluster (name, API endpoint, CA, service CIDR), stripes the local
NVMe disks into RAID0 for the container runtime and kubelet, and registers the node with the
labels (kubelet ``--node-labels``: the KubeletConfiguration has no field for them) and the GPU taint
(KubeletConfiguration ``registerWithTaints``, instead of the deprecated ``--register-with-taints`` flag)
that the training charts select and tolerate.

A ``text/cloud-boothook`` part runs first, at every boot, before ``nodeadm`` configures and starts containerd and
the kubelet (the AMI's ``nodeadm-run.service`` is ordered after ``cloud-final.service``). It

* reserves the instance table's 2 MiB hugepages (``vm.nr_hugepages``): the kubelet reports ``hugepages-2Mi`` only for
  pages reserved when it starts, and a training pod that requests them stays Pending on a node without them. It
  raises the count, never lowers it, and fails loudly (console log) when the kernel could not reserve them all;
* gives containerd, and so every container, an unlimited ``RLIMIT_MEMLOCK`` (a systemd drop-in): the EFA driver
  pins registered memory against that limit (or needs ``CAP_IPC_LOCK``), so the training pods need no added
  capability and the namespace can enforce Pod Security ``baseline`` (docs/infrastructure.md).

``gpu_node_labels`` / ``gpu_node_taints`` are the single source of what the node carries: the
charts test their ``nodeSelector`` and ``tolerations`` against them.
"""

from __future__ import annotations

from dataclasses import dataclass

import yaml

from platform_config import ProjectConfig

#: Label that the EFA device plugin selects (``vpc.amazonaws.com/efa.present: "true"``).
EFA_PRESENT_LABEL = "vpc.amazonaws.com/efa.present"
#: MIME boundary of the user data document (any string absent from the parts works).
MIME_BOUNDARY = "==NODEADM-BOUNDARY=="


class _QuotingDumper(yaml.SafeDumper):
    """Double-quotes every string value that holds a CDK token, so the deploy-time value stays one YAML string."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    style = '"' if "${Token[" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_QuotingDumper.add_representer(str, _represent_str)


def gpu_node_labels(cfg: ProjectConfig) -> dict[str, str]:
    """Kubelet labels of a GPU node: ``cfg.gpu_nodes.node_labels`` plus the EFA-present label."""
    labels = dict(sorted(cfg.gpu_nodes.node_labels.items()))
    labels[EFA_PRESENT_LABEL] = "true"
    return labels


def gpu_node_taints(cfg: ProjectConfig) -> list[str]:
    """Taints a GPU node registers with, ``key[=value]:Effect`` (``cfg.gpu_nodes.node_taints``)."""
    return list(cfg.gpu_nodes.node_taints)


def gpu_node_taint_objects(cfg: ProjectConfig) -> list[dict[str, str]]:
    """The taints as Kubernetes ``Taint`` objects (``key``, optional ``value``, ``effect``)."""
    out = []
    for taint in gpu_node_taints(cfg):
        spec, effect = taint.rsplit(":", 1)
        key, sep, value = spec.partition("=")
        out.append({"key": key, **({"value": value} if sep else {}), "effect": effect})
    return out


def gpu_node_tolerations(cfg: ProjectConfig) -> list[dict[str, str]]:
    """Kubernetes tolerations matching every GPU node taint (any value)."""
    out = []
    for taint in gpu_node_taints(cfg):
        key_value, effect = taint.rsplit(":", 1)
        out.append({"key": key_value.split("=", 1)[0], "operator": "Exists", "effect": effect})
    return out


@dataclass(frozen=True)
class ClusterConnection:
    """What a node needs to join the cluster (CDK tokens at synth, resolved at deploy).

    Attributes:
        name: EKS cluster name.
        endpoint: API server URL (``https://...``).
        certificate_authority: base64 CA bundle of the API server.
        service_cidr: the cluster's Kubernetes service IPv4 CIDR.
    """

    name: str
    endpoint: str
    certificate_authority: str
    service_cidr: str


def node_config(cfg: ProjectConfig, cluster: ClusterConnection) -> dict:
    """The ``node.eks.aws/v1alpha1`` NodeConfig of a GPU node."""
    labels = ",".join(f"{k}={v}" for k, v in gpu_node_labels(cfg).items())
    spec: dict = {
        "cluster": {
            "name": cluster.name,
            "apiServerEndpoint": cluster.endpoint,
            "certificateAuthority": cluster.certificate_authority,
            "cidr": cluster.service_cidr,
        },
        "kubelet": {"flags": [f"--node-labels={labels}"]},
    }
    if gpu_node_taints(cfg):
        spec["kubelet"]["config"] = {"registerWithTaints": gpu_node_taint_objects(cfg)}
    if cfg.instance.local_nvme:
        spec["instance"] = {"localStorage": {"strategy": "RAID0"}}
    return {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig", "spec": spec}


#: systemd drop-in that lifts containerd's (and its containers') locked-memory limit.
MEMLOCK_DROPIN = "/etc/systemd/system/containerd.service.d/90-memlock-unlimited.conf"


def boothook(cfg: ProjectConfig) -> str:
    """The boothook: ``cfg.instance.hugepages_2mi_reserved`` 2 MiB pages, and unlimited locked memory for containerd."""
    pages = cfg.instance.hugepages_2mi_reserved
    return (
        "#cloud-boothook\n"
        "#!/bin/bash\n"
        "set -euo pipefail\n"
        "# Containers inherit containerd's RLIMIT_MEMLOCK: EFA memory registration needs it unlimited.\n"
        f"mkdir -p {MEMLOCK_DROPIN.rsplit('/', 1)[0]}\n"
        f"printf '[Service]\\nLimitMEMLOCK=infinity\\n' > {MEMLOCK_DROPIN}\n"
        "# Reserve 2 MiB hugepages before the kubelet starts (it reports only pages reserved at its start).\n"
        f"want={pages}\n"
        "have=$(cat /proc/sys/vm/nr_hugepages)\n"
        'if [ "$have" -lt "$want" ]; then sysctl -w vm.nr_hugepages="$want"; fi\n'
        "got=$(cat /proc/sys/vm/nr_hugepages)\n"
        'if [ "$got" -lt "$want" ]; then echo "hugepages: reserved $got of $want 2 MiB pages" >&2; exit 1; fi\n'
    )


def mime_user_data(cfg: ProjectConfig, cluster: ClusterConnection) -> str:
    """The whole user data document (plain text; the launch template base64-encodes it)."""
    body = yaml.dump(
        node_config(cfg, cluster), Dumper=_QuotingDumper, sort_keys=False, default_flow_style=False, width=10_000
    )
    return (
        "MIME-Version: 1.0\n"
        f'Content-Type: multipart/mixed; boundary="{MIME_BOUNDARY}"\n'
        "\n"
        f"--{MIME_BOUNDARY}\n"
        'Content-Type: text/cloud-boothook; charset="us-ascii"\n'
        "\n"
        f"{boothook(cfg)}"
        "\n"
        f"--{MIME_BOUNDARY}\n"
        "Content-Type: application/node.eks.aws\n"
        "\n"
        "---\n"
        f"{body}"
        "\n"
        f"--{MIME_BOUNDARY}--\n"
    )
