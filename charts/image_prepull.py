"""DaemonSet that pulls the training image onto every GPU node, the spares included, before a pod needs it.

A hot spare (``gpu_nodes.spare_nodes``) saves the 10 minutes of a new p5 only if the replacement pod also finds its
image there: pulling a multi-GB training image when the node is already lost adds minutes back. The DaemonSet runs
on the same nodes as the training pods (their nodeSelector and tolerations): an init container of the training image
that only runs ``true`` (so the kubelet pulls the image, and ``IfNotPresent`` keeps it), then a container of the same
image that sleeps, which holds the pod, and so the image (the kubelet's image GC spares images in use), on the node
for as long as the node lives: no second registry (a private cluster may reach none but its ECR). Its requests are
tiny, and it does not tolerate the node-failure taints, so it never delays a node's eviction.
"""

from __future__ import annotations

from cdk8s_plus_36 import k8s
from constructs import Construct

from charts.names import group_labels
from charts.node_placement import node_selector, taint_tolerations
from charts.pod_security import AUTOMOUNT_SERVICE_ACCOUNT_TOKEN, dataset_security_context, pod_security_context
from platform_config import ProjectConfig

#: What the holding container runs: nothing, for as long as the node lives.
HOLD_COMMAND = ["sleep", "infinity"]
#: Requests and limits of each container: a few millicores and MiB, never in the training pod's way.
RESOURCES = {"cpu": "10m", "memory": "16Mi"}


def prepull_name(cfg: ProjectConfig) -> str:
    return f"{cfg.job.job_name}-image-prepull"


class ImagePrepull(Construct):
    """The DaemonSet (module docstring) over the GPU nodes of ``cfg``, pulling ``image``."""

    def __init__(self, scope: Construct, id: str, cfg: ProjectConfig, *, image: str) -> None:
        super().__init__(scope, id)
        self.name = prepull_name(cfg)
        labels = {**group_labels(cfg), "app.kubernetes.io/component": "image-prepull"}
        quantities = {k: k8s.Quantity.from_string(v) for k, v in RESOURCES.items()}
        resources = k8s.ResourceRequirements(requests=quantities, limits=quantities)

        def container(name: str, command: list[str]) -> k8s.Container:
            """A container of the training image (kept on the node: ``IfNotPresent``) running ``command``."""
            return k8s.Container(
                name=name,
                image=image,
                image_pull_policy="IfNotPresent",
                command=command,
                resources=resources,
                security_context=dataset_security_context(),
            )

        self.resource = k8s.KubeDaemonSet(
            self,
            "Resource",
            metadata=k8s.ObjectMeta(name=self.name, namespace=cfg.job.namespace, labels=labels),
            spec=k8s.DaemonSetSpec(
                selector=k8s.LabelSelector(match_labels=labels),
                template=k8s.PodTemplateSpec(
                    metadata=k8s.ObjectMeta(labels=labels),
                    spec=k8s.PodSpec(
                        automount_service_account_token=AUTOMOUNT_SERVICE_ACCOUNT_TOKEN,
                        node_selector=node_selector(cfg, cfg.instance),
                        tolerations=taint_tolerations(cfg),
                        security_context=pod_security_context(),
                        init_containers=[container("pull", ["true"])],
                        containers=[container("hold", HOLD_COMMAND)],
                    ),
                ),
            ),
        )
