"""Typed views of the synthesized manifests the local cluster runs: the Job, its ConfigMap and headless Service.

Only the fields the local cluster acts on are read, and anything it cannot honour is an error that names the field
(a manifest the harness would silently mis-run is worse than none). Field meanings follow the Kubernetes API
reference for ``batch/v1`` Job and ``v1`` Pod.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from platform_config.loader import SAFE_LOADER

#: The extended resource of the NVIDIA device plugin.
GPU_RESOURCE = "nvidia.com/gpu"


class ManifestError(ValueError):
    """A manifest the local cluster cannot run as written."""


@dataclass(frozen=True)
class EnvVar:
    """A container env var: a literal ``value`` or a downward-API ``fieldRef`` path."""

    name: str
    value: str | None = None
    field_path: str | None = None


@dataclass(frozen=True)
class VolumeMount:
    name: str
    mount_path: str
    read_only: bool = False


@dataclass(frozen=True)
class Volume:
    """``configMap`` (name), ``persistentVolumeClaim`` (claim) or ``emptyDir`` (medium, size limit)."""

    name: str
    kind: str
    ref: str | None = None
    medium: str = ""
    size_limit: str | None = None


@dataclass(frozen=True)
class Container:
    name: str
    image: str
    argv: list[str]
    env: list[EnvVar]
    mounts: list[VolumeMount]
    working_dir: str | None = None
    gpus: int = 0  # resources.limits["nvidia.com/gpu"]: what the NVIDIA device plugin gives the container


@dataclass(frozen=True)
class PodFailurePolicyRule:
    """One ``podFailurePolicy`` rule: an exit-code requirement or pod-condition patterns, and the action."""

    action: str  # FailJob | FailIndex | Ignore | Count
    container_name: str | None = None
    operator: str | None = None  # In | NotIn
    values: tuple[int, ...] = ()
    conditions: tuple[tuple[str, str], ...] = ()  # (type, status)


@dataclass(frozen=True)
class JobManifest:
    """The parts of a ``batch/v1`` Job the local controller implements (Indexed, or a single completion)."""

    name: str
    namespace: str
    completions: int
    parallelism: int
    backoff_limit: int
    backoff_limit_per_index: int | None
    max_failed_indexes: int | None
    pod_replacement_policy: str
    rules: list[PodFailurePolicyRule]
    container: Container
    volumes: dict[str, Volume]
    subdomain: str | None
    termination_grace_s: int
    labels: dict[str, str] = field(default_factory=dict)
    indexed: bool = True
    active_deadline_s: float | None = None
    #: ``tolerationSeconds`` of the pod's NoExecute tolerations of the node-failure taints (``not-ready``,
    #: ``unreachable``); absent: Kubernetes' admission default, :data:`DEFAULT_TOLERATION_S`.
    node_failure_toleration_s: float = 300.0


#: The taints the node lifecycle controller puts on a node that stops answering, and the DefaultTolerationSeconds
#: admission plugin's toleration of them.
NODE_FAILURE_TAINTS = ("node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable")
DEFAULT_TOLERATION_S = 300.0
#: ``spec`` fields of a Job the local controller implements (``ttlSecondsAfterFinished`` only acts after the end).
JOB_SPEC_FIELDS = frozenset(
    {
        "activeDeadlineSeconds",
        "backoffLimit",
        "backoffLimitPerIndex",
        "completionMode",
        "completions",
        "maxFailedIndexes",
        "parallelism",
        "podFailurePolicy",
        "podReplacementPolicy",
        "template",
        "ttlSecondsAfterFinished",
    }
)


@dataclass(frozen=True)
class DisruptionBudget:
    """A ``policy/v1`` PodDisruptionBudget: ``maxUnavailable`` over the pods its selector matches."""

    name: str
    max_unavailable: int
    match_labels: dict[str, str]

    def allows(self, unavailable: int) -> bool:
        """Whether the Eviction API admits one more eviction with ``unavailable`` matched pods already down."""
        return unavailable + 1 <= self.max_unavailable


def node_failure_toleration(pod: dict[str, Any]) -> float:
    """The shortest ``tolerationSeconds`` among the pod's NoExecute tolerations of the node-failure taints."""
    found = [
        float(t["tolerationSeconds"])
        for t in pod.get("tolerations") or []
        if t.get("key") in NODE_FAILURE_TAINTS and t.get("effect") == "NoExecute" and "tolerationSeconds" in t
    ]
    return min(found, default=DEFAULT_TOLERATION_S)


_QUANTITY = re.compile(r"^(\d+)(Ki|Mi|Gi|Ti)?$")
_UNITS = {None: 1, "Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30, "Ti": 1 << 40}


def quantity_bytes(q: str) -> int:
    """Bytes of a binary-suffixed quantity (``64Gi``); other forms are refused."""
    m = _QUANTITY.match(q)
    if not m:
        raise ManifestError(f"quantity {q!r}: the local cluster reads integers with Ki/Mi/Gi/Ti only")
    return int(m.group(1)) * _UNITS[m.group(2)]


def _env(raw: dict[str, Any]) -> EnvVar:
    if "value" in raw:
        return EnvVar(raw["name"], value=str(raw["value"]))
    ref = (raw.get("valueFrom") or {}).get("fieldRef")
    if not ref:
        raise ManifestError(f"env {raw['name']}: only value and valueFrom.fieldRef are supported locally")
    return EnvVar(raw["name"], field_path=ref["fieldPath"])


def _volume(raw: dict[str, Any]) -> Volume:
    name = raw["name"]
    if "configMap" in raw:
        return Volume(name, "configMap", ref=raw["configMap"]["name"])
    if "persistentVolumeClaim" in raw:
        return Volume(name, "persistentVolumeClaim", ref=raw["persistentVolumeClaim"]["claimName"])
    if "emptyDir" in raw:
        ed = raw["emptyDir"] or {}
        return Volume(name, "emptyDir", medium=ed.get("medium", ""), size_limit=ed.get("sizeLimit"))
    raise ManifestError(f"volume {name}: only configMap, persistentVolumeClaim and emptyDir are supported locally")


def _rule(raw: dict[str, Any]) -> PodFailurePolicyRule:
    codes = raw.get("onExitCodes")
    if codes:
        return PodFailurePolicyRule(
            raw["action"], codes.get("containerName"), codes["operator"], tuple(int(v) for v in codes["values"])
        )
    conds = tuple((c["type"], c.get("status", "True")) for c in raw.get("onPodConditions") or ())
    return PodFailurePolicyRule(raw["action"], conditions=conds)


def parse_job(doc: dict[str, Any]) -> JobManifest:
    """A :class:`JobManifest` from a Job document; refuses what the local controller does not implement."""
    spec = doc["spec"]
    unknown = sorted(set(spec) - JOB_SPEC_FIELDS)
    if unknown:
        raise ManifestError(f"Job spec.{unknown[0]}: the local Job controller does not implement it")
    indexed = spec.get("completionMode") == "Indexed"
    if not indexed and int(spec.get("completions", 1)) != 1:
        raise ManifestError("spec.completionMode: the local cluster runs Indexed Jobs, or Jobs of one completion")
    pod = spec["template"]["spec"]
    if pod.get("restartPolicy") != "Never":
        raise ManifestError("spec.template.spec.restartPolicy must be Never (podFailurePolicy requires it)")
    if len(pod["containers"]) != 1 or pod.get("initContainers"):
        raise ManifestError("spec.template.spec: the local cluster runs exactly one container and no init containers")
    c = pod["containers"][0]
    container = Container(
        name=c["name"],
        image=c["image"],
        argv=[*(c.get("command") or []), *(c.get("args") or [])],
        env=[_env(e) for e in c.get("env") or []],
        mounts=[VolumeMount(m["name"], m["mountPath"], bool(m.get("readOnly"))) for m in c.get("volumeMounts") or []],
        working_dir=c.get("workingDir"),
        gpus=int(((c.get("resources") or {}).get("limits") or {}).get(GPU_RESOURCE, 0)),
    )
    if not container.argv:
        raise ManifestError("the container has no command: the local cluster cannot read the image's ENTRYPOINT")
    policy = spec.get("podFailurePolicy") or {}
    return JobManifest(
        name=doc["metadata"]["name"],
        namespace=doc["metadata"].get("namespace", "default"),
        completions=int(spec.get("completions", 1)),
        parallelism=int(spec.get("parallelism", 1)),
        backoff_limit=int(spec.get("backoffLimit", 6)),
        backoff_limit_per_index=spec.get("backoffLimitPerIndex"),
        max_failed_indexes=spec.get("maxFailedIndexes"),
        pod_replacement_policy=spec.get("podReplacementPolicy", "TerminatingOrFailed"),
        rules=[_rule(r) for r in policy.get("rules") or []],
        container=container,
        volumes={v["name"]: _volume(v) for v in pod.get("volumes") or []},
        subdomain=pod.get("subdomain"),
        termination_grace_s=int(pod.get("terminationGracePeriodSeconds", 30)),
        labels=dict(spec["template"].get("metadata", {}).get("labels") or {}),
        indexed=indexed,
        active_deadline_s=spec.get("activeDeadlineSeconds"),
        node_failure_toleration_s=node_failure_toleration(pod),
    )


@dataclass(frozen=True)
class Manifests:
    """Every object of a ``cdk8s synth`` output directory, by kind and name."""

    jobs: dict[str, JobManifest]
    config_maps: dict[str, dict[str, str]]
    headless_services: set[str]
    budgets: dict[str, DisruptionBudget] = field(default_factory=dict)

    @classmethod
    def load(cls, directory: Path) -> Manifests:
        jobs: dict[str, JobManifest] = {}
        config_maps: dict[str, dict[str, str]] = {}
        services: set[str] = set()
        budgets: dict[str, DisruptionBudget] = {}
        for path in sorted(directory.glob("*.yaml")):
            for doc in yaml.load_all(path.read_text(), Loader=SAFE_LOADER):
                if not doc:
                    continue
                kind, name = doc["kind"], doc["metadata"]["name"]
                if kind == "Job":
                    jobs[name] = parse_job(doc)
                elif kind == "ConfigMap":
                    config_maps[name] = dict(doc.get("data") or {})
                elif kind == "Service" and doc["spec"].get("clusterIP") == "None":
                    services.add(name)
                elif kind == "PodDisruptionBudget":
                    budgets[name] = parse_budget(doc)
        return cls(jobs, config_maps, services, budgets)


def parse_budget(doc: dict[str, Any]) -> DisruptionBudget:
    """A budget with an integer ``maxUnavailable``; ``minAvailable`` or a percentage is refused."""
    spec, name = doc["spec"], doc["metadata"]["name"]
    raw = spec.get("maxUnavailable")
    if not isinstance(raw, int) or "minAvailable" in spec:
        raise ManifestError(f"PodDisruptionBudget {name}: the local cluster reads an integer maxUnavailable only")
    return DisruptionBudget(name, raw, dict((spec.get("selector") or {}).get("matchLabels") or {}))
