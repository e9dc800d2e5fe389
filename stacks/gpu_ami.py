"""The SSM parameter of the GPU nodes' AMI, without aws-cdk-lib (``make preflight`` checks it exists)."""

from __future__ import annotations

from platform_config import ProjectConfig


def gpu_ami_parameter_name(cfg: ProjectConfig) -> str:
    """SSM parameter of the AL2023 NVIDIA EKS AMI: the release-specific one of ``gpu_nodes.ami_release``
    (``.../nvidia/amazon-eks-node-al2023-x86_64-nvidia-<k8s>-<release>/image_id``, whose value never changes), or,
    in a demo without a release, ``.../nvidia/recommended/image_id`` (which moves with every AMI AWS publishes)."""
    k8s = cfg.cluster.kubernetes_version
    release = cfg.gpu_nodes.ami_release
    leaf = f"amazon-eks-node-al2023-x86_64-nvidia-{k8s}-{release}" if release else "recommended"
    return f"/aws/service/eks/optimized-ami/{k8s}/amazon-linux-2023/x86_64/nvidia/{leaf}/image_id"
