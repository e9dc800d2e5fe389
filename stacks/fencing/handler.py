"""Node fencing agent (AWS Lambda, Python 3.14, boto3 of the runtime): fence GPU nodes that cannot recover alone.

Invoked every minute, it polls for about 55 s, every ``POLL_S`` seconds, the GPU nodes (the Kubernetes API, label
selector ``NODE_SELECTOR``), their instances (EC2) and their Auto Scaling lifecycle states, and acts on
:func:`decide`'s rules:

1. **NotReady, instance alive** (``Ready`` not ``True`` while EC2 says ``running``: a hung kernel, a dead kubelet):
   nothing would ever delete the Node, so the pod stays Terminating and its index is never replaced. Cordon it and
   mark the instance ``Unhealthy`` in its Auto Scaling group (``autoscaling:SetInstanceHealth``), which terminates
   and replaces it.
2. **A GPU fault on a Ready node** (``AcceleratedHardwareReady=False``, set by the EKS node monitoring agent from
   NVIDIA XIDs and DCGM diagnostics): the pod fails, and its replacement would return to the same node (a counted
   failure each time). Cordon it first (the replacement lands elsewhere), then mark the instance ``Unhealthy``: the
   termination handler drains it through the Eviction API (``DisruptionTarget``, not counted).
3. **A fenced node's lifecycle hook**: an unreachable node cannot be drained, so complete its termination hook
   (``CONTINUE``) instead of letting it wait the drain timeout.
4. **Instance gone** (``shutting-down``, ``terminated``, ``stopped``) and the node NotReady: taint it
   ``node.kubernetes.io/out-of-service=nodeshutdown:NoExecute``, so that PodGC deletes its Terminating pods at its
   next pass instead of after the Node's deletion and a 40 s quarantine (Kubernetes non-graceful node shutdown).

The Kubernetes API is reached with an EKS token (a presigned STS ``GetCallerIdentity``, what ``aws eks get-token``
makes) for the function's role, whose access entry maps it to a group bound to a ClusterRole that may read and patch
nodes only. The same rules run in the local cluster's EKS timeline (training/cluster/node_timeline.py).
"""

from __future__ import annotations

import base64
import json
import os
import ssl
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

OUT_OF_SERVICE = {"key": "node.kubernetes.io/out-of-service", "value": "nodeshutdown", "effect": "NoExecute"}
GONE = ("shutting-down", "terminated", "stopping", "stopped")
POLL_S = 5.0
#: Stop polling this long before the invocation's deadline.
MARGIN_S = 8.0
MERGE = "application/merge-patch+json"


@dataclass(frozen=True)
class NodeView:
    """What the rules read of one GPU node."""

    name: str
    instance: str  # i-...
    ready: str  # the Ready condition's status: True | False | Unknown
    gpu_ok: bool  # AcceleratedHardwareReady is not False
    unschedulable: bool
    out_of_service: bool
    ec2_state: str  # running | shutting-down | terminated | ...
    lifecycle: str  # the Auto Scaling lifecycle state: InService | Terminating:Wait | ...
    health: str  # the Auto Scaling health status: HEALTHY | UNHEALTHY


def decide(nodes: list[NodeView]) -> list[tuple[str, str, str]]:
    """(action, node, instance) for every rule that applies (module docstring); actions: ``cordon``, ``unhealthy``,
    ``complete-hook``, ``taint``."""
    out = []
    for n in nodes:
        alive = n.ec2_state == "running"
        not_ready = n.ready != "True"
        if alive and (not_ready or not n.gpu_ok):
            if not n.unschedulable:
                out.append(("cordon", n.name, n.instance))
            if n.health != "UNHEALTHY" and n.lifecycle == "InService":
                out.append(("unhealthy", n.name, n.instance))
        if not_ready and n.lifecycle == "Terminating:Wait":
            out.append(("complete-hook", n.name, n.instance))
        if not_ready and n.ec2_state in GONE and not n.out_of_service:
            out.append(("taint", n.name, n.instance))
    return out


def node_view(node: dict[str, Any], ec2: dict[str, str], asg: dict[str, tuple[str, str]]) -> NodeView | None:
    """A :class:`NodeView` of a Kubernetes Node object, or None when it is not an EC2 instance we know."""
    provider = node.get("spec", {}).get("providerID", "")  # aws:///us-west-2b/i-0123...
    instance = provider.rsplit("/", 1)[-1]
    if not instance.startswith("i-") or instance not in asg:
        return None
    conditions = {c["type"]: c["status"] for c in node.get("status", {}).get("conditions", [])}
    taints = node.get("spec", {}).get("taints") or []
    return NodeView(
        name=node["metadata"]["name"],
        instance=instance,
        ready=conditions.get("Ready", "Unknown"),
        gpu_ok=conditions.get("AcceleratedHardwareReady") != "False",
        unschedulable=bool(node["spec"].get("unschedulable")),
        out_of_service=any(t.get("key") == OUT_OF_SERVICE["key"] for t in taints),
        ec2_state=ec2.get(instance, "unknown"),
        lifecycle=asg[instance][0],
        health=asg[instance][1],
    )


class Kubernetes:
    """The few Kubernetes API calls the agent makes, with an EKS token."""

    def __init__(self, endpoint: str, ca_b64: str, cluster: str, region: str) -> None:
        self.endpoint, self.cluster, self.region = endpoint.rstrip("/"), cluster, region
        self.ssl = ssl.create_default_context(cadata=base64.b64decode(ca_b64).decode())

    def token(self) -> str:
        import boto3
        from botocore.signers import RequestSigner

        session = boto3.session.Session()
        sts = session.client("sts", region_name=self.region)
        signer = RequestSigner(
            sts.meta.service_model.service_id, self.region, "sts", "v4", session.get_credentials(), session.events
        )
        url = signer.generate_presigned_url(
            {
                "method": "GET",
                "url": f"https://sts.{self.region}.amazonaws.com/?Action=GetCallerIdentity&Version=2011-06-15",
                "body": {},
                "headers": {"x-k8s-aws-id": self.cluster},
                "context": {},
            },
            region_name=self.region,
            expires_in=60,
            operation_name="",
        )
        return "k8s-aws-v1." + base64.urlsafe_b64encode(url.encode()).decode().rstrip("=")

    def call(self, method: str, path: str, body: Any = None, content_type: str = "application/json") -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(f"{self.endpoint}{path}", data=data, method=method)
        req.add_header("Authorization", f"Bearer {self.token()}")
        req.add_header("Content-Type", content_type)
        with urllib.request.urlopen(req, context=self.ssl, timeout=10) as resp:
            return json.loads(resp.read() or b"{}")


def act(action: str, node: NodeView, kube: Kubernetes, autoscaling: Any, env: dict[str, str]) -> None:
    if action == "cordon":
        kube.call("PATCH", f"/api/v1/nodes/{node.name}", {"spec": {"unschedulable": True}}, MERGE)
    elif action == "unhealthy":
        autoscaling.set_instance_health(
            InstanceId=node.instance, HealthStatus="Unhealthy", ShouldRespectGracePeriod=False
        )
    elif action == "complete-hook":
        autoscaling.complete_lifecycle_action(
            LifecycleHookName=env["LIFECYCLE_HOOK"],
            AutoScalingGroupName=env["GROUP_NAME"],
            LifecycleActionResult="CONTINUE",
            InstanceId=node.instance,
        )
    elif action == "taint":
        patch = [{"op": "add", "path": "/spec/taints/-", "value": OUT_OF_SERVICE}]
        kube.call("PATCH", f"/api/v1/nodes/{node.name}", patch, "application/json-patch+json")
    print(json.dumps({"fenced": action, "node": node.name, "instance": node.instance}), flush=True)


def poll_once(kube: Kubernetes, ec2: Any, autoscaling: Any, env: dict[str, str]) -> None:
    nodes = kube.call("GET", f"/api/v1/nodes?labelSelector={env['NODE_SELECTOR']}")["items"]
    group = autoscaling.describe_auto_scaling_groups(AutoScalingGroupNames=[env["GROUP_NAME"]])
    members = group["AutoScalingGroups"][0]["Instances"] if group["AutoScalingGroups"] else []
    asg = {i["InstanceId"]: (i["LifecycleState"], i["HealthStatus"].upper()) for i in members}
    states: dict[str, str] = {}
    if asg:
        for r in ec2.describe_instances(InstanceIds=list(asg))["Reservations"]:
            for i in r["Instances"]:
                states[i["InstanceId"]] = i["State"]["Name"]
    views = {v.name: v for v in (node_view(n, states, asg) for n in nodes) if v is not None}
    for action, name, _ in decide(list(views.values())):
        try:
            act(action, views[name], kube, autoscaling, env)
        except Exception as err:  # one node's failed call must not stop the others; the next poll retries
            print(json.dumps({"error": str(err), "action": action, "node": name}), flush=True)


def handler(event: dict[str, Any], context: Any) -> None:
    import boto3

    env = dict(os.environ)
    kube = Kubernetes(env["CLUSTER_ENDPOINT"], env["CLUSTER_CA"], env["CLUSTER_NAME"], env["AWS_REGION"])
    ec2, autoscaling = boto3.client("ec2"), boto3.client("autoscaling")
    while context.get_remaining_time_in_millis() / 1000 > MARGIN_S + POLL_S:
        poll_once(kube, ec2, autoscaling, env)
        time.sleep(POLL_S)
