"""The EKS control plane (``cluster``) and the Helm charts the CDK app installs in it (``helm``)."""

from __future__ import annotations

import ipaddress
import re
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from platform_config.instance_types import system_instance_type
from platform_config.schema.base import _semver, _Strict
from platform_config.versions import (
    DEFAULT_ADDON_VERSIONS,
    DEFAULT_KUBERNETES_VERSION,
    MANAGED_ADDONS,
    SUPPORTED_KUBERNETES_MINORS,
    supported_versions_text,
)

_IAM_PRINCIPAL_ARN = re.compile(r"arn:aws(-cn|-us-gov)?:iam::\d{12}:(role|user)/[\w+=,.@/-]+")


class ClusterConfig(_Strict):
    """The EKS control plane."""

    name: str = Field(default="fsdp-resilience", pattern=r"^[A-Za-z][A-Za-z0-9-]{0,99}$")
    #: One of ``platform_config.versions.SUPPORTED_KUBERNETES_MINORS`` (1.32 .. 1.36).
    kubernetes_version: str = DEFAULT_KUBERNETES_VERSION
    endpoint_access: Literal["private", "public"] = "public"
    #: CIDRs allowed to reach a public endpoint. Empty with ``public`` is rejected; documentation ranges
    #: (RFC 5737, the demo's 203.0.113.0/24) are rejected outside ``environment_kind: demo``.
    public_access_cidrs: list[str] = Field(default_factory=lambda: ["203.0.113.0/24"])
    #: IAM role or user ARN given cluster-admin through an access entry: the identity you run kubectl with.
    #: Required outside ``environment_kind: demo`` (without it nobody can use kubectl after deploy).
    admin_principal_arn: str | None = None
    #: Managed node group for CoreDNS, controllers and the dataset-preparation Job (``<family>.<size>`` of
    #: ``platform_config.instance_types.SYSTEM_FAMILIES``).
    system_node_instance_type: str = "m6i.xlarge"
    system_node_count: int = Field(default=2, ge=1, le=10)
    #: Kubernetes labels of the system nodes (the dataset-preparation Job selects them).
    system_node_labels: dict[str, str] = Field(default_factory=lambda: {"node-group": "system"})
    #: EKS managed add-on versions, add-on name -> version (``v1.2.3-eksbuild.N``). Every add-on is pinned: the
    #: defaults for ``kubernetes_version`` come from ``platform_config.versions.DEFAULT_ADDON_VERSIONS``, entries
    #: given here replace single add-ons. kube-proxy must match the cluster minor; vpc-cni must be >= 1.18.5.
    addon_versions: dict[str, str] = Field(default_factory=dict)
    #: Kubernetes service IPv4 CIDR (EKS allows /12../24 in 10/8, 172.16/12 or 192.168/16); GPU nodes'
    #: NodeConfig carries it, so it is fixed here rather than left to EKS. Must not overlap network.vpc_cidr.
    service_ipv4_cidr: str = "172.20.0.0/16"

    @model_validator(mode="before")
    @classmethod
    def _pin_addons(cls, data: Any) -> Any:
        """Fill ``addon_versions`` with the pins of the configured Kubernetes minor (single entries override)."""
        if not isinstance(data, dict):
            return data
        m = re.fullmatch(r"1\.(\d+)", str(data.get("kubernetes_version", DEFAULT_KUBERNETES_VERSION)))
        default_minor = int(DEFAULT_KUBERNETES_VERSION.split(".")[1])
        # An unsupported version is reported by its own validator; the default minor's pins keep this one quiet.
        defaults = DEFAULT_ADDON_VERSIONS.get(
            int(m.group(1)) if m else default_minor, DEFAULT_ADDON_VERSIONS[default_minor]
        )
        given = data.get("addon_versions") or {}
        if not isinstance(given, dict):
            return data
        return {**data, "addon_versions": {**defaults, **given}}

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, v: str) -> str:
        m = re.fullmatch(r"1\.(\d+)", v)
        if not m:
            raise ValueError("must look like '1.NN'")
        if int(m.group(1)) not in SUPPORTED_KUBERNETES_MINORS:
            raise ValueError(
                f"must be one of {supported_versions_text()} (default {DEFAULT_KUBERNETES_VERSION}): the versions "
                "EKS still supports that have a pinned kubectl layer and pinned add-on versions"
            )
        return v

    @field_validator("admin_principal_arn")
    @classmethod
    def _admin(cls, v: str | None) -> str | None:
        if v is not None and not _IAM_PRINCIPAL_ARN.fullmatch(v):
            raise ValueError(
                "must be an IAM role or user ARN like 'arn:aws:iam::111122223333:role/Admin' "
                "(for an assumed-role session use the role's ARN, not the sts session ARN)"
            )
        return v

    @field_validator("system_node_instance_type")
    @classmethod
    def _system_type(cls, v: str) -> str:
        system_instance_type(v)
        return v

    @field_validator("addon_versions")
    @classmethod
    def _addons(cls, v: dict[str, str]) -> dict[str, str]:
        unknown = set(v) - set(MANAGED_ADDONS)
        if unknown:
            raise ValueError(f"unknown add-on(s) {sorted(unknown)}; allowed: {', '.join(MANAGED_ADDONS)}")
        missing = [name for name in MANAGED_ADDONS if name not in v]
        if missing:
            raise ValueError(f"every add-on must be pinned; missing {missing}")
        for name, version in v.items():
            if not re.fullmatch(r"v\d+\.\d+\.\d+-eksbuild\.\d+", version):
                raise ValueError(f"{name} version {version!r} must look like 'v1.2.3-eksbuild.1'")
        if _semver(v["vpc-cni"][1:].split("-")[0]) < (1, 18, 5):
            raise ValueError("vpc-cni must be >= v1.18.5 (efa-only network interfaces)")
        return v

    @field_validator("service_ipv4_cidr")
    @classmethod
    def _service_cidr(cls, v: str) -> str:
        try:
            net = ipaddress.IPv4Network(v)
        except ValueError as exc:
            raise ValueError(f"not an IPv4 CIDR: {exc}") from None
        allowed = [ipaddress.IPv4Network(c) for c in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")]
        if not (12 <= net.prefixlen <= 24 and any(net.subnet_of(a) for a in allowed)):
            raise ValueError("must be a /12../24 block inside 10.0.0.0/8, 172.16.0.0/12 or 192.168.0.0/16")
        return v

    @model_validator(mode="after")
    def _cidrs(self) -> ClusterConfig:
        if self.endpoint_access == "public" and not self.public_access_cidrs:
            raise ValueError("endpoint_access 'public' needs at least one public_access_cidrs entry")
        for cidr in self.public_access_cidrs:
            try:
                ipaddress.IPv4Network(cidr)
            except ValueError as exc:
                raise ValueError(f"public_access_cidrs entry {cidr!r} is not an IPv4 CIDR: {exc}") from None
        proxy_minor = self.addon_versions["kube-proxy"].split(".")[1]
        if f"1.{proxy_minor}" != self.kubernetes_version:
            raise ValueError(
                f"addon_versions kube-proxy {self.addon_versions['kube-proxy']!r} is for Kubernetes 1.{proxy_minor}, "
                f"not kubernetes_version {self.kubernetes_version!r} (kube-proxy must match the cluster minor)"
            )
        return self

    @property
    def minor(self) -> int:
        return int(self.kubernetes_version.split(".")[1])


class HelmConfig(_Strict):
    """Pinned Helm chart versions (every chart the CDK app installs)."""

    nvidia_device_plugin: str = "0.19.3"
    #: aws/eks-charts publishes this chart's versions with a leading ``v``.
    efa_device_plugin: str = "v0.5.30"
    #: aws-node-termination-handler (queue processor), from oci://public.ecr.aws/aws-ec2/helm.
    node_termination_handler: str = "0.27.6"

    @field_validator("nvidia_device_plugin")
    @classmethod
    def _nvidia(cls, v: str) -> str:
        if _semver(v) < (0, 19, 3):
            raise ValueError("must be >= 0.19.3 (0.19.0-0.19.2 enable MOFED, which conflicts with the EFA plugin)")
        return v

    @field_validator("efa_device_plugin")
    @classmethod
    def _efa(cls, v: str) -> str:
        if _semver(v.removeprefix("v")) < (0, 5, 10):
            raise ValueError("must be >= v0.5.10")
        return v

    @field_validator("node_termination_handler")
    @classmethod
    def _nth(cls, v: str) -> str:
        _semver(v)
        return v
