"""``make preflight``'s fabric check: nccl-tests' ``all_reduce_perf`` across two GPU nodes over EFA.

Two pods of the training image, each taking a whole GPU node as a training pod does (every GPU and EFA device, the
hugepages, the training container's security context, placement and tolerations), with the EFA/NCCL environment
the training pods get (``charts/efa_env.py``) plus:

* ``NCCL_NET="AWS Libfabric"``: NCCL uses the aws-ofi-nccl plugin or fails; it never falls back to TCP sockets, so
  a fabric that does not work stops the test instead of measuring sockets;
* ``NCCL_DEBUG=INFO``: the log names the network NCCL chose (``Using network AWS Libfabric``), which is checked too.

Pod 1 serves the image's remote-shell agent (``image/rsh.py``, a random token shared by the two pods); pod 0 runs
``mpirun`` (the EFA installer's Open MPI) with that agent, one rank per GPU on each node::

    all_reduce_perf -b 8 -e 16G -f 2 -g 1 -c 1 -n 50 -w 5

(nccl-tests README: ``-b``/``-e`` smallest and largest message, ``-f 2`` doubling, ``-g 1`` one GPU per rank, ``-c 1``
check the results, ``-n``/``-w`` timed and warm-up iterations). The bus bandwidth of the largest message is compared
with ``InstanceType.expected_allreduce_busbw_gbs`` of the instance table; any wrong value fails the check.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from charts.efa_env import efa_nccl_env
from charts.node_placement import node_selector
from charts.pod_resources import resource_quantities
from charts.pod_security import AUTOMOUNT_SERVICE_ACCOUNT_TOKEN, SECCOMP_PROFILE, TRAINING_CAPABILITIES
from platform_config import ProjectConfig
from stacks.gpu_user_data import gpu_node_tolerations

#: Where the image carries nccl-tests and the agent (training/Dockerfile).
ALL_REDUCE_PERF = "/opt/nccl-tests/all_reduce_perf"
RSH_AGENT = "python3 /opt/image/rsh.py"
MPIRUN = "/opt/amazon/openmpi/bin/mpirun"
#: The aws-ofi-nccl plugin's network name: NCCL_NET set to it makes NCCL fail rather than fall back to sockets.
OFI_NETWORK = "AWS Libfabric"
#: Largest message: large enough that the bus bandwidth is the network's, not the latency's.
MAX_BYTES = "16G"
NAME = "preflight-nccl"
APP_LABEL = "app.kubernetes.io/name"
RSH_PORT = 2222


def fabric_env(cfg: ProjectConfig, token: str) -> dict[str, str]:
    """The training pods' EFA/NCCL environment, NCCL forced onto the OFI plugin and verbose, the agent's token."""
    env = efa_nccl_env(cfg.instance)
    env.update({"NCCL_NET": OFI_NETWORK, "NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET", "RSH_TOKEN": token})
    env["RSH_PORT"] = str(RSH_PORT)
    return env


def mpirun_argv(cfg: ProjectConfig, peer: str) -> list[str]:
    """``mpirun`` of pod 0: one rank per GPU here and on ``peer`` (pod 1's address), every variable forwarded."""
    gpus = cfg.instance.gpus
    forwarded = [*sorted(fabric_env(cfg, "").keys() - {"RSH_TOKEN", "RSH_PORT"}), "LD_LIBRARY_PATH", "PATH"]
    argv = [MPIRUN, "--allow-run-as-root", "-np", str(2 * gpus), "--host", f"localhost:{gpus},{peer}:{gpus}"]
    argv += ["--mca", "plm_rsh_agent", RSH_AGENT, "--mca", "plm_rsh_no_tree_spawn", "1", "--bind-to", "none"]
    for name in forwarded:
        argv += ["-x", name]
    return [*argv, ALL_REDUCE_PERF, "-b", "8", "-e", MAX_BYTES, "-f", "2", "-g", "1", "-c", "1", "-n", "50", "-w", "5"]


def fabric_pod(cfg: ProjectConfig, image: str, index: int, token: str, peer: str | None = None) -> dict:
    """Pod ``index`` of the test: 1 serves the agent, 0 (given pod 1's address) runs ``mpirun``."""
    quantities = resource_quantities(cfg.instance)
    capabilities: dict = {"drop": ["ALL"]}
    if TRAINING_CAPABILITIES:
        capabilities["add"] = list(TRAINING_CAPABILITIES)
    if index == 1:
        command = ["python3", "/opt/image/rsh.py", "serve"]
    elif peer is not None:
        command = mpirun_argv(cfg, peer)
    else:
        raise ValueError("pod 0 runs mpirun and needs pod 1's address (peer)")
    env = fabric_env(cfg, token)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{NAME}-{index}", "namespace": cfg.job.namespace, "labels": {APP_LABEL: NAME}},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": AUTOMOUNT_SERVICE_ACCOUNT_TOKEN,
            "serviceAccountName": cfg.job.service_account,
            "nodeSelector": node_selector(cfg, cfg.instance),
            "tolerations": gpu_node_tolerations(cfg),
            "affinity": {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {APP_LABEL: NAME}}, "topologyKey": "kubernetes.io/hostname"}
                    ]
                }
            },
            "containers": [
                {
                    "name": "nccl",
                    "image": image,
                    "command": command,
                    "env": [{"name": k, "value": v} for k, v in sorted(env.items())],
                    "ports": [{"containerPort": RSH_PORT, "name": "rsh"}] if index == 1 else [],
                    "resources": {"requests": dict(quantities), "limits": dict(quantities)},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "privileged": False,
                        "capabilities": capabilities,
                        "seccompProfile": {"type": SECCOMP_PROFILE},
                    },
                    "volumeMounts": [{"name": "dshm", "mountPath": "/dev/shm"}],
                }
            ],
            "volumes": [{"name": "dshm", "emptyDir": {"medium": "Memory", "sizeLimit": f"{cfg.job.shm_size_gib}Gi"}}],
        },
    }


@dataclass(frozen=True)
class AllReduceRow:
    """One message size of ``all_reduce_perf``'s table (out-of-place and in-place)."""

    size_bytes: int
    busbw_out: float
    wrong_out: float
    busbw_in: float
    wrong_in: float

    @property
    def busbw(self) -> float:
        return max(self.busbw_out, self.busbw_in)

    @property
    def wrong(self) -> float:
        return self.wrong_out + self.wrong_in


def parse_all_reduce(log: str) -> list[AllReduceRow]:
    """The result rows: ``size count type redop root`` then ``time algbw busbw #wrong`` twice (nccl-tests' format)."""
    rows = []
    for line in log.splitlines():
        fields = line.split()
        if len(fields) >= 13 and fields[0].isdigit() and fields[1].isdigit():
            try:
                out_bw, out_wrong, in_bw, in_wrong = (float(fields[i]) for i in (7, 8, 11, 12))
            except ValueError:
                continue
            rows.append(AllReduceRow(int(fields[0]), out_bw, out_wrong, in_bw, in_wrong))
    return rows


def fabric_results(cfg: ProjectConfig, log: str) -> list[tuple[str, bool, str]]:
    """``(name, ok, detail)`` of the run: the network NCCL used, correctness, bus bandwidth against the table."""
    results = []
    networks = sorted(set(re.findall(r"NCCL INFO Using network (.+?)\s*$", log, re.MULTILINE)))
    results.append(
        (
            "fabric:network",
            networks == [OFI_NETWORK],
            f"NCCL used {', '.join(networks) or 'no network (no NCCL INFO line)'}; expected {OFI_NETWORK}",
        )
    )
    rows = parse_all_reduce(log)
    if not rows:
        tail = " | ".join(log.strip().splitlines()[-3:]) or "no output"
        results.append(("fabric:all_reduce", False, f"no all_reduce_perf results: {tail}"))
        return results
    wrong = sum(r.wrong for r in rows)
    bounds = re.search(r"# Out of bounds values\s*:\s*(\d+)\s*(\w*)", log)
    correct = wrong == 0 and bounds is not None and bounds.group(1) == "0"
    results.append(
        ("fabric:correctness", correct, f"{wrong:g} wrong values; out of bounds: {bounds and bounds.group(1)}")
    )
    largest = max(rows, key=lambda r: r.size_bytes)
    want = cfg.instance.expected_allreduce_busbw_gbs
    results.append(
        (
            "fabric:busbw",
            largest.busbw >= want,
            f"{largest.busbw:g} GB/s at {largest.size_bytes} bytes across 2 x {cfg.instance.name} "
            f"(expected >= {want:g}: {cfg.instance.efa_gbps} Gbit/s of EFA per node, see "
            "platform_config/instance_types.py)",
        )
    )
    return results
