"""``make preflight``: is the deployed platform ready for a training run? Skips cleanly without a cluster.

    make preflight ENV=prod                       # or: python -m scripts.preflight --env prod

With AWS credentials (``aws sts get-caller-identity`` works), before or after deploying:

* every pinned EKS add-on version exists for ``cluster.kubernetes_version`` (``aws eks describe-addon-versions``);
* the release-specific SSM parameter of ``gpu_nodes.ami_release`` exists (the AMI the GPU nodes boot);
* with an existing VPC (``network.vpc_id``), every private subnet has a default route through a NAT gateway (or a
  transit gateway or appliance): the kubectl/Helm handler of the cluster stack runs in those subnets and pulls the
  Helm charts from the internet; without one, the interface endpoints it needs are listed;
* the capacity reservation of an ODCR or Capacity Block is the configured instance type in
  ``aws.availability_zone``, holds ``node_count + spare_nodes`` instances and, for a Capacity Block, has the
  configured start and end.

With a reachable cluster (kubectl and a kubeconfig, ``aws eks update-kubeconfig ...``):

* GPU nodes: Ready, and allocatable ``nvidia.com/gpu``, ``vpc.amazonaws.com/efa`` and ``hugepages-2Mi`` as large as
  the training pod requests (``platform_config/instance_types.py``);
* the NVIDIA and EFA device plugins and the node termination handler are ready;
* the FSx PVC is Bound to the static PV;
* with two Ready GPU nodes, nccl-tests' ``all_reduce_perf`` across them over EFA, NCCL forced onto the OFI plugin
  (``scripts/preflight_fabric.py``): the bus bandwidth of the largest message against the instance table;
* a probe pod per node group that mounts FSx (GPU, with the training pod's security context; system), from the
  training image (``TRAINING_IMAGE_URI`` or the ``TrainingImageUri`` stack output), runs ``image/checks.py
  runtime``: it writes and reads back a file on the FSx mount (the node's kernel and Lustre client agree), and on
  the GPU node also checks ``ulimit -l``, the launcher flags the charts generate and the aws-ofi-nccl plugin.

Each check prints ``ok``, ``FAIL`` or ``SKIP`` with its reason; the exit status is 1 when any check failed, else 0.
Without kubectl or a reachable cluster, and without AWS credentials, it prints why and exits 0. The check logic
(the functions taking parsed JSON) is unit-tested on kubectl/AWS CLI output shapes in tests/unit/scripts.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from charts.node_placement import node_selector
from charts.pod_resources import EFA_RESOURCE, GPU_RESOURCE, HUGEPAGES_RESOURCE, resource_quantities
from charts.pod_security import (
    AUTOMOUNT_SERVICE_ACCOUNT_TOKEN,
    SECCOMP_PROFILE,
    TRAINING_CAPABILITIES,
)
from platform_config import ProjectConfig, exits_on_config_error, load_config
from platform_config.schema import CapacityType
from scripts import preflight_fabric as fabric
from stacks.gpu_ami import gpu_ami_parameter_name
from stacks.gpu_user_data import gpu_node_tolerations
from stacks.helm_releases import EFA_CHART, EFA_REPOSITORY, NTH_CHART, NTH_REPOSITORY, NVIDIA_CHART, NVIDIA_REPOSITORY

#: Where the image carries image/ (training/Dockerfile).
IMAGE_CHECKS = "/opt/image/checks.py"
IMAGE_FLAGS = "/opt/image/launcher-flags.txt"
PROBE_PREFIX = "preflight"
INSTANCE_LABEL = "app.kubernetes.io/instance"
#: Seconds a probe pod may take (pulling a multi-GB image onto a fresh node takes minutes).
PROBE_TIMEOUT_S = 900


@dataclass(frozen=True)
class Result:
    """One check: ``status`` is ``ok``, ``FAIL`` or ``SKIP``."""

    name: str
    status: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<4} {self.name}: {self.detail}"


def ok(name: str, detail: str) -> Result:
    return Result(name, "ok", detail)


def fail(name: str, detail: str) -> Result:
    return Result(name, "FAIL", detail)


def skip(name: str, detail: str) -> Result:
    return Result(name, "SKIP", detail)


# ------------------------------------------------------------------------------------------ quantities


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
_DECIMAL = {"k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "m": 10**-3}


def quantity(text: str) -> float:
    """A Kubernetes quantity (``8``, ``10256Mi``, ``2000m``, ``1.5Gi``) as a number (bytes / cores / count)."""
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", str(text))
    if not m:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    number, suffix = float(m.group(1)), m.group(2)
    if suffix in _BINARY:
        return number * _BINARY[suffix]
    if suffix in _DECIMAL:
        return number * _DECIMAL[suffix]
    if suffix:
        raise ValueError(f"unknown quantity suffix in {text!r}")
    return number


# ------------------------------------------------------------------------------------------ cluster checks


def gpu_nodes_check(nodes: dict, cfg: ProjectConfig) -> list[Result]:
    """Ready GPU nodes (by the node group's labels) whose allocatable fits the training pod."""
    labels = node_selector(cfg, cfg.instance)
    gpu = [n for n in nodes.get("items", []) if labels.items() <= n["metadata"].get("labels", {}).items()]
    want = cfg.gpu_nodes.node_count
    results = [
        (ok if len(gpu) >= want else fail)(
            "gpu-nodes", f"{len(gpu)} of {want} {cfg.instance.name} nodes registered (labels {labels})"
        )
    ]
    needed = resource_quantities(cfg.instance)
    for node in gpu:
        name = node["metadata"]["name"]
        ready = any(c["type"] == "Ready" and c["status"] == "True" for c in node["status"].get("conditions", []))
        allocatable = node["status"].get("allocatable", {})
        short = [
            f"{r} {allocatable.get(r, '0')} < {needed[r]}"
            for r in (GPU_RESOURCE, EFA_RESOURCE, HUGEPAGES_RESOURCE)
            if quantity(allocatable.get(r, "0")) < quantity(needed[r])
        ]
        if not ready:
            results.append(fail(f"node:{name}", "not Ready"))
        elif short:
            results.append(fail(f"node:{name}", "allocatable " + ", ".join(short)))
        else:
            have = ", ".join(f"{r}={allocatable[r]}" for r in (GPU_RESOURCE, EFA_RESOURCE, HUGEPAGES_RESOURCE))
            results.append(ok(f"node:{name}", f"Ready; {have}"))
    return results


def workloads_ready_check(daemonsets: dict, deployments: dict, gpu_nodes: int) -> list[Result]:
    """The device plugin DaemonSets (on every GPU node) and the node termination handler Deployment are ready."""
    results = []
    for release in (NVIDIA_CHART, EFA_CHART):
        sets = [
            d for d in daemonsets.get("items", []) if d["metadata"].get("labels", {}).get(INSTANCE_LABEL) == release
        ]
        if not sets:
            results.append(fail(release, "no DaemonSet of this Helm release in kube-system"))
            continue
        desired = sum(d["status"].get("desiredNumberScheduled", 0) for d in sets)
        ready = sum(d["status"].get("numberReady", 0) for d in sets)
        if ready < desired or desired < gpu_nodes:
            results.append(fail(release, f"{ready} ready of {desired} scheduled; {gpu_nodes} GPU nodes"))
        else:
            results.append(ok(release, f"{ready} ready of {desired} scheduled"))
    nth = [d for d in deployments.get("items", []) if d["metadata"].get("labels", {}).get(INSTANCE_LABEL) == NTH_CHART]
    if not nth:
        results.append(fail(NTH_CHART, "no Deployment of this Helm release in kube-system"))
    else:
        want = sum(d["spec"].get("replicas", 1) for d in nth)
        have = sum(d["status"].get("readyReplicas", 0) for d in nth)
        results.append((ok if have >= want else fail)(NTH_CHART, f"{have} of {want} replicas ready"))
    return results


def pvc_check(pvc: dict, cfg: ProjectConfig) -> Result:
    """The FSx claim is Bound to the static PV."""
    name = f"pvc:{cfg.storage.pvc_name}"
    phase = pvc.get("status", {}).get("phase")
    volume = pvc.get("spec", {}).get("volumeName")
    if phase == "Bound" and volume == cfg.storage.pv_name:
        return ok(name, f"Bound to {volume}")
    return fail(name, f"phase {phase}, volume {volume} (expected Bound to {cfg.storage.pv_name})")


# ------------------------------------------------------------------------------------------ probe pods


def probe_pod(cfg: ProjectConfig, image: str, group: str) -> dict:
    """A pod on a ``gpu`` or ``system`` node that mounts the FSx claim and runs ``image/checks.py runtime``. The GPU
    probe has the training container's security context, placement and tolerations; it requests no GPU."""
    name = f"{PROBE_PREFIX}-{group}"
    fsx_dir = f"{cfg.storage.mount_path}/{PROBE_PREFIX}"
    command = ["python3", IMAGE_CHECKS, "runtime", "--flags", IMAGE_FLAGS, "--ofi-nccl", cfg.image.aws_ofi_nccl_version]
    command += ["--fsx-dir", fsx_dir]
    capabilities: dict = {"drop": ["ALL"]}
    if group == "gpu":
        if TRAINING_CAPABILITIES:
            capabilities["add"] = list(TRAINING_CAPABILITIES)
        placement = {
            "nodeSelector": node_selector(cfg, cfg.instance),
            "tolerations": gpu_node_tolerations(cfg),
        }
    elif group == "system":
        command = ["python3", "-c", FSX_ONLY_PROBE, fsx_dir]
        placement = {"nodeSelector": dict(cfg.cluster.system_node_labels)}
    else:
        raise ValueError(f"probe group must be gpu or system, got {group!r}")
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": cfg.job.namespace, "labels": {"app.kubernetes.io/name": PROBE_PREFIX}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": AUTOMOUNT_SERVICE_ACCOUNT_TOKEN,
            "serviceAccountName": cfg.job.service_account,
            **placement,
            "containers": [
                {
                    "name": "probe",
                    "image": image,
                    "command": command,
                    "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "privileged": False,
                        "capabilities": capabilities,
                        "seccompProfile": {"type": SECCOMP_PROFILE},
                    },
                    "volumeMounts": [{"name": "fsx", "mountPath": cfg.storage.mount_path}],
                }
            ],
            "volumes": [{"name": "fsx", "persistentVolumeClaim": {"claimName": cfg.storage.pvc_name}}],
        },
    }


#: The system-node probe: only the FSx write/read of image/checks.py (the rest concerns GPU nodes).
FSX_ONLY_PROBE = (
    "import sys; sys.path.insert(0, '/opt/image'); import checks; from pathlib import Path; "
    "r = checks.fsx_check(Path(sys.argv[1])); print(r.line()); "
    "print('CHECKS ' + ('passed' if r.ok else 'FAILED: ' + r.name) + ' (1 checks)'); sys.exit(0 if r.ok else 1)"
)


def probe_results(group: str, log: str) -> list[Result]:
    """``CHECK <name> ok|FAIL <detail>`` lines of a probe's log; a log without the final ``CHECKS`` line failed."""
    results = []
    for line in log.splitlines():
        m = re.match(r"CHECK (\S+) (ok|FAIL) ?(.*)$", line)
        if m:
            results.append(Result(f"{group}:{m.group(1)}", m.group(2), m.group(3)))
    if not any(line.startswith("CHECKS ") for line in log.splitlines()):
        tail = " | ".join(log.strip().splitlines()[-3:]) or "no output"
        results.append(fail(f"{group}:probe", f"did not finish: {tail}"))
    return results


# ------------------------------------------------------------------------------------------ AWS checks


def addon_versions_check(described: dict[str, dict], cfg: ProjectConfig) -> list[Result]:
    """Each pinned add-on version is offered for the cluster's Kubernetes version (``describe-addon-versions``)."""
    results = []
    k8s = cfg.cluster.kubernetes_version
    for name, version in cfg.cluster.addon_versions.items():
        offered = {
            v["addonVersion"]
            for addon in described.get(name, {}).get("addons", [])
            for v in addon.get("addonVersions", [])
            if any(c.get("clusterVersion") == k8s for c in v.get("compatibilities", []))
        }
        if version in offered:
            results.append(ok(f"addon:{name}", f"{version} is offered for Kubernetes {k8s}"))
        else:
            newest = sorted(offered, key=_version_key)[-3:]
            results.append(
                fail(f"addon:{name}", f"{version} is not offered for Kubernetes {k8s}; newest offered: {newest}")
            )
    return results


def _version_key(v: str) -> tuple[int, ...]:
    return tuple(int(p) for p in re.findall(r"\d+", v))


def capacity_reservation_check(described: dict, cfg: ProjectConfig) -> list[Result]:
    """The reservation (``describe-capacity-reservations``) matches the instance type, AZ and Capacity Block window,
    and holds the group's every node (``node_count + spare_nodes``: the launch template targets it alone)."""
    cap = cfg.gpu_nodes.capacity
    name = f"reservation:{cap.reservation_id}"
    found = [r for r in described.get("CapacityReservations", []) if r["CapacityReservationId"] == cap.reservation_id]
    if not found:
        return [fail(name, "not found in this account and region")]
    r = found[0]
    problems = []
    if r["InstanceType"] != cfg.gpu_nodes.instance_type:
        problems.append(f"instance type {r['InstanceType']} (config {cfg.gpu_nodes.instance_type})")
    if r["AvailabilityZone"] != cfg.aws.availability_zone:
        problems.append(f"AZ {r['AvailabilityZone']} (config aws.availability_zone {cfg.aws.availability_zone})")
    nodes = cfg.gpu_nodes
    if int(r.get("TotalInstanceCount", 0)) < nodes.group_size:
        problems.append(
            f"{r.get('TotalInstanceCount')} instances < {nodes.group_size} "
            f"(node_count {nodes.node_count} + spare_nodes {nodes.spare_nodes})"
        )
    if cap.type is CapacityType.CAPACITY_BLOCK:
        for key, want in (("StartDate", cap.start), ("EndDate", cap.end)):
            got = datetime.fromisoformat(str(r.get(key, "")).replace("Z", "+00:00")) if r.get(key) else None
            if got != want:
                problems.append(f"{key} {r.get(key)} (config {want.isoformat() if want else None})")
    if r.get("State") not in ("active", "scheduled", "payment-pending"):
        problems.append(f"state {r.get('State')}")
    if problems:
        return [fail(name, "; ".join(problems))]
    return [ok(name, f"{r['State']}, {r['TotalInstanceCount']} x {r['InstanceType']} in {r['AvailabilityZone']}")]


def ami_release_check(parameters: dict, cfg: ProjectConfig) -> Result:
    """The release-specific parameter of ``gpu_nodes.ami_release`` exists (``ssm get-parameters`` output)."""
    name = gpu_ami_parameter_name(cfg)
    found = {p["Name"]: p.get("Value") for p in parameters.get("Parameters", [])}
    if name in found:
        return ok("ami", f"{cfg.gpu_nodes.ami_release or 'recommended'}: {found[name]} ({name})")
    return fail(
        "ami",
        f"no SSM parameter {name}: gpu_nodes.ami_release {cfg.gpu_nodes.ami_release!r} is not a release "
        f"for Kubernetes {cfg.cluster.kubernetes_version} in {cfg.aws.region}",
    )


#: Interface endpoints the kubectl/Helm handler would need without a NAT (its AWS calls); the Helm charts themselves
#: come from the internet (stacks/helm_releases.py), so no set of endpoints replaces egress.
HANDLER_ENDPOINTS = ("eks", "sts", "ecr.api", "ecr.dkr", "logs")
#: Route targets that give a private subnet egress.
EGRESS_TARGETS = ("NatGatewayId", "TransitGatewayId", "NetworkInterfaceId", "InstanceId")


def egress_check(route_tables: dict, endpoints: dict, cfg: ProjectConfig) -> list[Result]:
    """Per private subnet of an existing VPC: a default route (``0.0.0.0/0``) through a NAT gateway, transit gateway,
    appliance interface or instance (``describe-route-tables``), not blackholed; otherwise what is missing."""
    tables = route_tables.get("RouteTables", [])
    main = next((t for t in tables if any(a.get("Main") for a in t.get("Associations", []))), None)
    present = {
        ".".join(e["ServiceName"].split(".")[3:])  # com.amazonaws.<region>.<service>
        for e in endpoints.get("VpcEndpoints", [])
        if e.get("State", "available") == "available"
    }
    results = []
    for subnet in cfg.network.private_subnets:
        table = next((t for t in tables if any(a.get("SubnetId") == subnet for a in t.get("Associations", []))), main)
        routes = [] if table is None else table.get("Routes", [])
        default = next(
            (r for r in routes if r.get("DestinationCidrBlock") == "0.0.0.0/0" and r.get("State") != "blackhole"), {}
        )
        target = next((default[k] for k in EGRESS_TARGETS if default.get(k)), None)
        if target:
            results.append(ok(f"egress:{subnet}", f"default route via {target}"))
            continue
        via = "an internet gateway (a private subnet cannot use it)" if default.get("GatewayId") else "nothing"
        missing = [e for e in HANDLER_ENDPOINTS if e not in present]
        results.append(
            fail(
                f"egress:{subnet}",
                f"0.0.0.0/0 goes to {via}: the kubectl/Helm handler runs here and pulls {NVIDIA_REPOSITORY}, "
                f"{EFA_REPOSITORY} and {NTH_REPOSITORY}; add a NAT gateway route (interface endpoints missing as well: "
                f"{', '.join(missing) or 'none'})",
            )
        )
    return results


# ------------------------------------------------------------------------------------------ running it


Runner = Callable[[list[str]], subprocess.CompletedProcess]


def run_command(argv: list[str], stdin: str | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=timeout)


def json_of(argv: list[str]) -> dict:
    done = run_command(argv)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv[:4])} ...: {done.stderr.strip() or done.stdout.strip()}")
    return json.loads(done.stdout)


def unavailable(argv: list[str], missing: str, ok_marker: str) -> str | None:
    """Why ``argv`` cannot answer (its program missing, a timeout, an error, or no ``ok_marker`` in its output),
    prefixed by ``missing``; None when it answered."""
    if shutil.which(argv[0]) is None:
        return f"{argv[0]} is not on PATH"
    try:
        done = run_command(argv, timeout=30)
    except subprocess.TimeoutExpired:
        return f"{' '.join(argv[:3])} timed out"
    if done.returncode != 0 or ok_marker not in done.stdout:
        return f"{missing} ({(done.stderr.strip().splitlines() or ['no answer'])[-1]})"
    return None


def cluster_unreachable() -> str | None:
    """Why the cluster cannot be checked (None when kubectl reaches an API server)."""
    return unavailable(
        ["kubectl", "version", "-o", "json", "--request-timeout=10s"], "no reachable cluster", "serverVersion"
    )


def aws_unavailable() -> str | None:
    """Why AWS cannot be queried (None when the CLI has credentials)."""
    return unavailable(["aws", "sts", "get-caller-identity", "--output", "json"], "no AWS credentials", "Account")


def aws_checks(cfg: ProjectConfig) -> list[Result]:
    region = ["--region", cfg.aws.region, "--output", "json"]
    described = {
        name: json_of(["aws", "eks", "describe-addon-versions", "--addon-name", name, *region])
        for name in cfg.cluster.addon_versions
    }
    results = addon_versions_check(described, cfg)
    results.append(
        ami_release_check(
            json_of(["aws", "ssm", "get-parameters", "--names", gpu_ami_parameter_name(cfg), *region]), cfg
        )
    )
    if cfg.network.vpc_id:
        vpc = ["--filters", f"Name=vpc-id,Values={cfg.network.vpc_id}"]
        results += egress_check(
            json_of(["aws", "ec2", "describe-route-tables", *vpc, *region]),
            json_of(["aws", "ec2", "describe-vpc-endpoints", *vpc, *region]),
            cfg,
        )
    reservation = cfg.gpu_nodes.capacity.reservation_id
    if reservation:
        argv = ["aws", "ec2", "describe-capacity-reservations", "--capacity-reservation-ids", reservation, *region]
        try:
            results += capacity_reservation_check(json_of(argv), cfg)
        except RuntimeError as exc:
            results.append(fail(f"reservation:{reservation}", str(exc)))
    return results


def training_image(cfg: ProjectConfig) -> str | None:
    """``TRAINING_IMAGE_URI``, ``image.uri_override``, or the ``TrainingImageUri`` output of the image stack."""
    image = os.environ.get("TRAINING_IMAGE_URI") or cfg.image.uri_override
    if image or aws_unavailable():
        return image
    query = "Stacks[0].Outputs[?OutputKey=='TrainingImageUri'].OutputValue | [0]"
    done = run_command(
        [
            "aws",
            "cloudformation",
            "describe-stacks",
            "--region",
            cfg.aws.region,
            "--stack-name",
            f"{cfg.cluster.name}-image",
            "--query",
            query,
            "--output",
            "text",
        ]
    )
    value = done.stdout.strip()
    return value if done.returncode == 0 and value and value != "None" else None


def run_probe(cfg: ProjectConfig, image: str, group: str, timeout_s: int = PROBE_TIMEOUT_S) -> list[Result]:
    """Create the probe pod, wait for it to finish, collect its checks from the log, delete it."""
    pod = probe_pod(cfg, image, group)
    name, ns = pod["metadata"]["name"], cfg.job.namespace
    run_command(["kubectl", "-n", ns, "delete", "pod", name, "--ignore-not-found", "--wait=true"], timeout=120)
    created = run_command(["kubectl", "apply", "-f", "-"], stdin=json.dumps(pod))
    if created.returncode != 0:
        return [fail(f"{group}:probe", f"cannot create pod {ns}/{name}: {created.stderr.strip()}")]
    try:
        deadline = time.monotonic() + timeout_s
        phase = "Pending"
        while time.monotonic() < deadline:
            phase = json_of(["kubectl", "-n", ns, "get", "pod", name, "-o", "json"])["status"].get("phase", "Pending")
            if phase in ("Succeeded", "Failed"):
                break
            time.sleep(5)
        else:
            events = run_command(
                [
                    "kubectl",
                    "-n",
                    ns,
                    "get",
                    "events",
                    "--field-selector",
                    f"involvedObject.name={name}",
                    "-o",
                    "custom-columns=REASON:.reason,MESSAGE:.message",
                    "--no-headers",
                ]
            ).stdout.strip()
            last = " | ".join(events.splitlines()[-3:]) or "no events"
            return [fail(f"{group}:probe", f"still {phase} after {timeout_s} s: {last}")]
        log = run_command(["kubectl", "-n", ns, "logs", name], timeout=60).stdout
        return probe_results(group, log)
    finally:
        run_command(["kubectl", "-n", ns, "delete", "pod", name, "--ignore-not-found", "--wait=false"], timeout=60)


def wait_pod(ns: str, name: str, phases: tuple[str, ...], timeout_s: int) -> dict | None:
    """The pod once its phase is one of ``phases`` (None after ``timeout_s``)."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pod = json_of(["kubectl", "-n", ns, "get", "pod", name, "-o", "json"])
        if pod["status"].get("phase") in phases:
            return pod
        time.sleep(5)
    return None


def run_fabric(cfg: ProjectConfig, image: str, timeout_s: int = PROBE_TIMEOUT_S) -> list[Result]:
    """nccl-tests across two GPU nodes (``scripts/preflight_fabric.py``): start pod 1 (the agent), then pod 0
    (``mpirun``) with pod 1's address, read pod 0's log, delete both."""
    import secrets

    ns, token = cfg.job.namespace, secrets.token_hex(16)
    names = [f"{fabric.NAME}-{i}" for i in (0, 1)]
    for name in names:
        run_command(["kubectl", "-n", ns, "delete", "pod", name, "--ignore-not-found", "--wait=true"], timeout=120)
    try:
        server = fabric.fabric_pod(cfg, image, 1, token)
        created = run_command(["kubectl", "apply", "-f", "-"], stdin=json.dumps(server))
        if created.returncode != 0:
            return [fail("fabric", f"cannot create pod {ns}/{names[1]}: {created.stderr.strip()}")]
        running = wait_pod(ns, names[1], ("Running", "Failed", "Succeeded"), timeout_s)
        if running is None or running["status"].get("phase") != "Running":
            return [fail("fabric", f"pod {names[1]} is not running after {timeout_s} s")]
        launcher = fabric.fabric_pod(cfg, image, 0, token, peer=running["status"]["podIP"])
        created = run_command(["kubectl", "apply", "-f", "-"], stdin=json.dumps(launcher))
        if created.returncode != 0:
            return [fail("fabric", f"cannot create pod {ns}/{names[0]}: {created.stderr.strip()}")]
        if wait_pod(ns, names[0], ("Succeeded", "Failed"), timeout_s) is None:
            return [fail("fabric", f"pod {names[0]} did not finish within {timeout_s} s")]
        log = run_command(["kubectl", "-n", ns, "logs", names[0]], timeout=60).stdout
        return [
            Result(name, "ok" if good else "FAIL", detail) for name, good, detail in fabric.fabric_results(cfg, log)
        ]
    finally:
        for name in names:
            run_command(["kubectl", "-n", ns, "delete", "pod", name, "--ignore-not-found", "--wait=false"], timeout=60)


def cluster_checks(cfg: ProjectConfig, image: str | None) -> list[Result]:
    nodes = json_of(["kubectl", "get", "nodes", "-o", "json"])
    results = gpu_nodes_check(nodes, cfg)
    gpu_nodes = sum(1 for r in results if r.name.startswith("node:") and r.status == "ok")
    daemonsets = json_of(["kubectl", "-n", "kube-system", "get", "daemonsets", "-o", "json"])
    deployments = json_of(["kubectl", "-n", "kube-system", "get", "deployments", "-o", "json"])
    results += workloads_ready_check(daemonsets, deployments, gpu_nodes)
    pvc = run_command(["kubectl", "-n", cfg.job.namespace, "get", "pvc", cfg.storage.pvc_name, "-o", "json"])
    results.append(pvc_check(json.loads(pvc.stdout), cfg) if pvc.returncode == 0 else fail("pvc", pvc.stderr.strip()))
    if image is None:
        results.append(skip("probes", "no training image: set TRAINING_IMAGE_URI or deploy the image stack"))
    else:
        groups = ["system", "gpu"] if gpu_nodes else ["system"]
        if not gpu_nodes:
            results.append(skip("gpu:probe", "no Ready GPU node to run on"))
        for group in groups:
            results += run_probe(cfg, image, group)
        if gpu_nodes >= 2:
            results += run_fabric(cfg, image)
        else:
            results.append(skip("fabric", f"nccl-tests needs two Ready GPU nodes, {gpu_nodes} found"))
    return results


@exits_on_config_error
def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--env", default=os.environ.get("PROJECT_ENV") or "default")
    args = parser.parse_args(argv)
    cfg = load_config(env=args.env)
    print(f"== preflight [{args.env}]: cluster {cfg.cluster.name} in {cfg.aws.region} ==", flush=True)
    results: list[Result] = []
    no_aws = aws_unavailable()
    if no_aws:
        print(f"preflight: AWS checks skipped: {no_aws}")
    else:
        results += aws_checks(cfg)
    no_cluster = cluster_unreachable()
    if no_cluster:
        print(f"preflight: cluster checks skipped: {no_cluster} (aws eks update-kubeconfig --name {cfg.cluster.name})")
    else:
        results += cluster_checks(cfg, training_image(cfg))
    for r in results:
        print(r.line(), flush=True)
    failed = [r for r in results if r.status == "FAIL"]
    skipped = [r for r in results if r.status == "SKIP"]
    if not results:
        print("preflight: nothing to check here (no AWS credentials, no cluster); exiting 0")
        return 0
    print(f"preflight: {len(results) - len(failed) - len(skipped)} ok, {len(failed)} failed, {len(skipped)} skipped")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
