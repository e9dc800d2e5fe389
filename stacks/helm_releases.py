"""The Helm releases the platform installs, by name and repository: what ``make preflight`` looks for in the cluster
without loading aws-cdk-lib (the constructs that install them import these)."""

from __future__ import annotations

#: The NVIDIA and EFA device plugins (:mod:`stacks.device_plugins`).
NVIDIA_REPOSITORY = "https://nvidia.github.io/k8s-device-plugin"
NVIDIA_CHART = "nvidia-device-plugin"
EFA_REPOSITORY = "https://aws.github.io/eks-charts"
EFA_CHART = "aws-efa-k8s-device-plugin"
#: AWS Node Termination Handler (:mod:`stacks.node_termination_handler`): public ECR's OCI repository (eks-charts'
#: copy is deprecated).
NTH_REPOSITORY = "oci://public.ecr.aws/aws-ec2/helm/aws-node-termination-handler"
NTH_CHART = "aws-node-termination-handler"
