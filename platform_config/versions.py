"""Pinned platform versions: the Kubernetes minors this project accepts and the EKS add-on versions for each.

Every Kubernetes minor in :data:`SUPPORTED_KUBERNETES_MINORS`

* is still supported by Amazon EKS on 2026-11-30 (1.32 in extended support until 2027-03-23; 1.31 left
  extended support on 2026-11-26);
* runs the training Job's ``backoffLimitPerIndex`` / ``podReplacementPolicy`` (on by default since 1.29);
* has its kubectl Lambda layer pinned in ``requirements.txt`` (``aws-cdk.lambda-layer-kubectl-vNN``), so
  ``cdk synth`` works for it (``tests/unit/stacks/test_cluster.py`` synthesizes each one).

:data:`DEFAULT_ADDON_VERSIONS` pins every EKS managed add-on per minor. Sources (public records, not checked
against the EKS API from this repository, which has no AWS access): vpc-cni, kube-proxy and coredns per minor as
``aws eks describe-addon-versions`` listed them in ap-northeast-2 on 2026-09-04; kube-proxy/coredns/pod-identity
agent for 1.36 as a 1.36 cluster resolved them; aws-fsx-csi-driver v1.9.0 and amazon-cloudwatch-observability
v5.3.0 as pinned in 2026 EKS configurations; eks-node-monitoring-agent v1.7.0-eksbuild.1 as the agent's own Helm chart
pins its image (github.com/aws/eks-node-monitoring-agent, charts/eks-node-monitoring-agent/values.yaml, commit
0040fd7a, ``nodeAgent.image.tag``; module release v1.7.0 published 2026-08-04 on pkg.go.dev) and as a 1.35 cluster's
pins read from ``describe-addon-versions`` list it (github.com/devopscoop/aws-eks-template, cluster/terraform.tfvars;
a 1.36 cluster's published pins had v1.7.2-eksbuild.1 by 2026-12). ``make preflight`` checks every pin against
``aws eks describe-addon-versions`` for the configured minor before you deploy (docs/deploy.md).
"""

from __future__ import annotations

#: Kubernetes minors (1.NN) the configuration accepts.
SUPPORTED_KUBERNETES_MINORS: tuple[int, ...] = (32, 33, 34, 35, 36)
DEFAULT_KUBERNETES_VERSION = "1.36"

#: EKS managed add-ons the CDK app installs: six in stacks/addons.py, the CloudWatch one in stacks/observability.py.
MANAGED_ADDONS: tuple[str, ...] = (
    "vpc-cni",
    "kube-proxy",
    "coredns",
    "eks-pod-identity-agent",
    "aws-fsx-csi-driver",
    "amazon-cloudwatch-observability",
    "eks-node-monitoring-agent",
)

_VPC_CNI = "v1.22.4-eksbuild.3"
_POD_IDENTITY_AGENT = "v1.3.10-eksbuild.3"
_FSX_CSI_DRIVER = "v1.9.0-eksbuild.1"
_CLOUDWATCH_OBSERVABILITY = "v5.3.0-eksbuild.1"
#: Sets the ``AcceleratedHardwareReady`` node condition the fencing agent's GPU rule reads (stacks/node_fencing.py).
_NODE_MONITORING_AGENT = "v1.7.0-eksbuild.1"


def _pins(kube_proxy: str, coredns: str) -> dict[str, str]:
    return {
        "vpc-cni": _VPC_CNI,
        "kube-proxy": kube_proxy,
        "coredns": coredns,
        "eks-pod-identity-agent": _POD_IDENTITY_AGENT,
        "aws-fsx-csi-driver": _FSX_CSI_DRIVER,
        "amazon-cloudwatch-observability": _CLOUDWATCH_OBSERVABILITY,
        "eks-node-monitoring-agent": _NODE_MONITORING_AGENT,
    }


#: Add-on name -> version, per Kubernetes minor. ``cluster.addon_versions`` entries override single add-ons.
DEFAULT_ADDON_VERSIONS: dict[int, dict[str, str]] = {
    32: _pins("v1.32.13-eksbuild.24", "v1.11.4-eksbuild.51"),
    33: _pins("v1.33.10-eksbuild.21", "v1.12.4-eksbuild.29"),
    34: _pins("v1.34.6-eksbuild.21", "v1.12.4-eksbuild.29"),
    35: _pins("v1.35.3-eksbuild.21", "v1.13.2-eksbuild.21"),
    36: _pins("v1.36.0-eksbuild.21", "v1.14.3-eksbuild.16"),
}


def kubectl_layer_package(minor: int) -> str:
    """The PyPI package of the kubectl Lambda layer for Kubernetes ``1.<minor>``."""
    return f"aws-cdk.lambda-layer-kubectl-v{minor}"


def supported_versions_text() -> str:
    """``1.32 .. 1.36`` for error messages."""
    return f"1.{SUPPORTED_KUBERNETES_MINORS[0]} .. 1.{SUPPORTED_KUBERNETES_MINORS[-1]}"
