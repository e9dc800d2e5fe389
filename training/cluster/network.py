"""The local cluster's pod network: a bridge in a network namespace of its own, one veth per pod, and DNS records.

Nothing on the host changes: the bridge lives in a namespace held by a sleeping process (``unshare --net``), each
pod's ``eth0`` is the far end of a veth pair whose near end joins that bridge, and names resolve through one hosts
file that every pod sees as ``/etc/hosts`` (:class:`DnsRecords`). A pod gets a new address each time it is created,
as on a cluster, and its record is published for as long as it exists (the headless Service sets
``publishNotReadyAddresses``).

:meth:`ClusterNetwork.cut` takes a pod's link down: from then on its peers see silence, not a closed connection,
which is what a lost node looks like on a real network (and why NCCL peers wait for their timeout).
"""

from __future__ import annotations

import contextlib
import ipaddress
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

#: The pod network; the bridge holds the first address.
POD_CIDR = ipaddress.IPv4Network("10.244.0.0/16")
#: Cluster DNS domain of a Kubernetes cluster (kubelet ``--cluster-domain``).
CLUSTER_DOMAIN = "cluster.local"
BRIDGE = "cni0"
REQUIRED_TOOLS = ("unshare", "nsenter", "ip", "mount", "chroot")


class ClusterUnavailable(RuntimeError):
    """This machine cannot host the local cluster (not root, or namespaces / tools missing)."""


def check_host() -> None:
    """Raise :class:`ClusterUnavailable` naming what is missing: root and the util-linux / iproute2 tools."""
    if os.geteuid() != 0:
        raise ClusterUnavailable("the local multi-node runner needs root (it creates namespaces and mounts)")
    missing = [t for t in REQUIRED_TOOLS if shutil.which(t) is None]
    if missing:
        raise ClusterUnavailable(f"the local multi-node runner needs {', '.join(missing)} (util-linux, iproute2)")


@dataclass(frozen=True)
class PodRecord:
    """One pod's DNS names: ``<hostname>.<subdomain>.<namespace>.svc.<domain>`` and its short forms."""

    ip: str
    hostname: str
    subdomain: str
    namespace: str

    def names(self) -> list[str]:
        fqdn = f"{self.hostname}.{self.subdomain}.{self.namespace}.svc.{CLUSTER_DOMAIN}"
        return [
            fqdn,
            f"{self.hostname}.{self.subdomain}.{self.namespace}",
            f"{self.hostname}.{self.subdomain}",
            self.hostname,
        ]


class DnsRecords:
    """The cluster's name records as one hosts file, replaced atomically on every change.

    Pods see it through a bind-mounted directory (``/etc/cluster-dns/hosts``, with ``/etc/hosts`` a symlink to
    it), so a rename here is visible to every pod at its next lookup; glibc reads the file on every lookup.
    """

    FILE = "hosts"

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.directory.mkdir(parents=True, exist_ok=True)
        self.records: dict[str, PodRecord] = {}
        self._write()

    def publish(self, pod: str, record: PodRecord) -> None:
        self.records[pod] = record
        self._write()

    def withdraw(self, pod: str) -> None:
        if self.records.pop(pod, None) is not None:
            self._write()

    def _write(self) -> None:
        lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost ip6-loopback"]
        lines += [f"{r.ip}\t{' '.join(r.names())}" for r in self.records.values()]
        tmp = self.directory / f".{self.FILE}.tmp"
        tmp.write_text("\n".join(lines) + "\n")
        os.replace(tmp, self.directory / self.FILE)


class ClusterNetwork:
    """The bridge namespace and the address pool; pods are attached by the PID of a process in their namespace."""

    def __init__(self) -> None:
        self._holder: subprocess.Popen[bytes] | None = None
        self._hosts = POD_CIDR.hosts()
        self.gateway = str(next(self._hosts))
        self._links = 0

    def start(self) -> None:
        """Create the namespace and its bridge; returns once the bridge is up."""
        check_host()
        script = (
            f"set -e; ip link set lo up; ip link add {BRIDGE} type bridge; "
            f"ip addr add {self.gateway}/{POD_CIDR.prefixlen} dev {BRIDGE}; ip link set {BRIDGE} up; "
            "echo ready; exec sleep infinity"
        )
        self._holder = subprocess.Popen(
            ["unshare", "--net", "--", "bash", "-c", script], stdout=subprocess.PIPE, start_new_session=True
        )
        assert self._holder.stdout is not None
        line = self._holder.stdout.readline()
        if line.strip() != b"ready":
            self.close()
            raise ClusterUnavailable(f"could not create the pod network namespace (got {line!r})")

    def allocate(self) -> str:
        """A fresh pod address (pods never reuse one within a run)."""
        return str(next(self._hosts))

    def _ip(self, *args: str) -> None:
        assert self._holder is not None, "network not started"
        subprocess.run(
            ["nsenter", "-t", str(self._holder.pid), "-n", "ip", *args], check=True, capture_output=True, text=True
        )

    def attach(self, pod_pid: int) -> str:
        """Create a veth pair: ``eth0`` inside the namespace of ``pod_pid``, the other end on the bridge."""
        self._links += 1
        host_if = f"veth{self._links}"
        self._ip("link", "add", host_if, "type", "veth", "peer", "name", "eth0", "netns", str(pod_pid))
        self._ip("link", "set", host_if, "master", BRIDGE, "up")
        return host_if

    def cut(self, host_if: str) -> None:
        """Take a pod's link down: its packets, FIN and RST included, no longer reach anyone."""
        with contextlib.suppress(subprocess.CalledProcessError):  # the pod (and its veth pair) may be gone
            self._ip("link", "set", host_if, "down")

    def close(self) -> None:
        if self._holder is not None and self._holder.poll() is None:
            self._holder.kill()
            self._holder.wait()
        self._holder = None
