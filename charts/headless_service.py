"""Headless Service that gives every training pod a stable DNS name ``<job>-<index>.<service>``."""

from __future__ import annotations

from cdk8s_plus_36 import k8s
from constructs import Construct

from charts.names import group_labels, service_name
from platform_config import ProjectConfig


class HeadlessService(Construct):
    """``clusterIP: None`` + ``publishNotReadyAddresses``: names resolve before any pod is Ready (pods have no probes).

    It selects the training pods of every recovery-mode variant; the variants' pod hostnames differ by mode.
    """

    def __init__(self, scope: Construct, id: str, cfg: ProjectConfig) -> None:
        super().__init__(scope, id)
        self.name = service_name(cfg)
        selector = {**group_labels(cfg), "app.kubernetes.io/component": "training"}
        self.resource = k8s.KubeService(
            self,
            "Resource",
            metadata=k8s.ObjectMeta(name=self.name, namespace=cfg.job.namespace, labels=group_labels(cfg)),
            spec=k8s.ServiceSpec(
                cluster_ip="None",
                publish_not_ready_addresses=True,
                selector=selector,
                ports=[
                    k8s.ServicePort(
                        name="rendezvous",
                        port=cfg.job.rendezvous_port,
                        target_port=k8s.IntOrString.from_number(cfg.job.rendezvous_port),
                        protocol="TCP",
                    ),
                    k8s.ServicePort(
                        name="inprocess-store",
                        port=cfg.job.inprocess_store_port,
                        target_port=k8s.IntOrString.from_number(cfg.job.inprocess_store_port),
                        protocol="TCP",
                    ),
                ],
            ),
        )
