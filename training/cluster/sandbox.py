"""A pod as Linux namespaces: its own PIDs, mounts, hostname and network, on a copy-on-write view of this machine.

What a container runtime gives a pod, and what this reproduces (the host's own configuration is never changed):

* **root file system**: an overlay whose lower layer is ``/`` and whose upper layer is the pod's own directory, so
  ``/tmp`` and every other path the pod writes are private to it (like a container's writable layer);
* **volumes**: bind mounts of host directories (the PersistentVolumeClaim, the ConfigMap's files) and ``tmpfs``
  for ``emptyDir`` with ``medium: Memory``;
* **the image**: the source tree bind-mounted at the image's ``WORKDIR`` (see :mod:`training.cluster.image`);
* **hostname and DNS**: a UTS namespace with the pod's hostname, ``/etc/hosts`` from the cluster's records;
* **PID 1**: the container's command is exec'd as PID 1 of a PID namespace, so killing it kills every process of
  the pod, daemons that double-forked away included (what the kubelet does when a container is killed).

Needs root (``unshare``/``mount``). The pod waits on a pipe until its network is attached (:meth:`PodSandbox.start`).
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from training.cluster.network import ClusterNetwork


@dataclass(frozen=True)
class Mount:
    """One mount inside the pod: ``bind`` of a host path, or ``tmpfs`` of ``size_bytes`` (0 = the kernel default)."""

    target: str
    kind: str  # "bind" | "tmpfs"
    source: Path | None = None
    read_only: bool = False
    size_bytes: int = 0

    def __post_init__(self) -> None:
        if self.kind not in ("bind", "tmpfs"):
            raise ValueError(f"mount kind must be bind or tmpfs, got {self.kind!r}")
        if self.kind == "bind" and self.source is None:
            raise ValueError(f"bind mount at {self.target} needs a source")
        if not self.target.startswith("/"):
            raise ValueError(f"mount target must be absolute, got {self.target!r}")


@dataclass(frozen=True)
class PodSpec:
    """What to run and where: the container's argv and environment, its working directory, mounts and address."""

    name: str
    hostname: str
    ip: str
    prefix_len: int
    argv: list[str]
    env: dict[str, str]
    workdir: str
    mounts: list[Mount] = field(default_factory=list)
    dns_dir: Path | None = None


def init_script(spec: PodSpec, pod_dir: Path) -> str:
    """The bash run as PID 1 of the new namespaces: wait for the network, build the root, exec the container."""
    root = pod_dir / "root"
    q = shlex.quote
    lines = [
        "set -euo pipefail",
        "read -r _ <&3; exec 3<&-",  # the runner attached eth0
        "ip link set lo up",
        f"ip addr add {spec.ip}/{spec.prefix_len} dev eth0",
        "ip link set eth0 up",
        f"hostname {q(spec.hostname)}",
        "mount --make-rprivate /",
        f"mount -t overlay overlay -o lowerdir=/,upperdir={q(str(pod_dir / 'upper'))},"
        f"workdir={q(str(pod_dir / 'work'))} {q(str(root))}",
        f"mount -t proc proc {q(str(root / 'proc'))}",
        f"mount --rbind /dev {q(str(root / 'dev'))}",
        f"mount --rbind /sys {q(str(root / 'sys'))}",
    ]
    for m in spec.mounts:
        target = q(str(root) + m.target)
        if m.kind == "bind" and m.source is not None and not m.source.is_dir():  # a file (socket) needs a file
            lines.append(f"mkdir -p {q(str(root) + str(Path(m.target).parent))} && touch {target}")
        else:
            lines.append(f"mkdir -p {target}")
        if m.kind == "tmpfs":
            size = f"-o size={m.size_bytes}" if m.size_bytes else ""
            lines.append(f"mount -t tmpfs {size} tmpfs {target}".replace("  ", " "))
        else:
            lines.append(f"mount --bind {q(str(m.source))} {target}")
            if m.read_only:
                lines.append(f"mount -o remount,bind,ro {target}")
    if spec.dns_dir is not None:
        etc = root / "etc"
        lines += [
            f"mkdir -p {q(str(etc / 'cluster-dns'))}",
            f"mount --bind {q(str(spec.dns_dir))} {q(str(etc / 'cluster-dns'))}",
            f"rm -f {q(str(etc / 'hosts'))} {q(str(etc / 'resolv.conf'))}",
            f"ln -s /etc/cluster-dns/hosts {q(str(etc / 'hosts'))}",
            # No resolver is reachable from the pod network: fail fast instead of waiting for a timeout.
            f"printf 'nameserver 127.0.0.1\\noptions timeout:1 attempts:1\\n' > {q(str(etc / 'resolv.conf'))}",
        ]
    env = [f"{k}={v}" for k, v in sorted(spec.env.items())]
    inner = f'cd {q(spec.workdir)} && exec "$@"'
    lines.append(
        f"exec chroot {q(str(root))} /usr/bin/env -i {' '.join(q(e) for e in env)} "
        f"bash -c {q(inner)} container {' '.join(q(a) for a in spec.argv)}"
    )
    return "\n".join(lines) + "\n"


class PodSandbox:
    """One running pod. :meth:`start` returns once PID 1 is running; :meth:`poll` gives its exit code."""

    def __init__(self, spec: PodSpec, pod_dir: Path, network: ClusterNetwork, log_path: Path) -> None:
        self.spec = spec
        self.pod_dir = pod_dir
        self.network = network
        self.log_path = log_path
        self.proc: subprocess.Popen[bytes] | None = None
        self.init_pid: int | None = None  # PID 1 of the pod, as the host sees it
        self.host_if: str | None = None
        self.started_at: float | None = None
        self.finished_at: float | None = None
        self.exit_code: int | None = None

    def start(self) -> None:
        for sub in ("upper", "work", "root"):
            (self.pod_dir / sub).mkdir(parents=True, exist_ok=True)
        script = self.pod_dir / "init.sh"
        script.write_text(init_script(self.spec, self.pod_dir))
        read_fd, write_fd = os.pipe()
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    "unshare",
                    "--pid",
                    "--mount",
                    "--uts",
                    "--net",
                    "--kill-child=SIGKILL",
                    "--",
                    "bash",
                    "-c",
                    f"exec 3<&{read_fd} {read_fd}<&-; exec bash {shlex.quote(str(script))}",
                ],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                pass_fds=(read_fd,),
                start_new_session=True,
            )
        os.close(read_fd)
        try:
            self.init_pid = self._child_pid()
            self.host_if = self.network.attach(self.init_pid)
        except Exception:
            os.close(write_fd)
            self.kill()
            raise
        os.write(write_fd, b"go\n")
        os.close(write_fd)
        self.started_at = time.time()

    def _child_pid(self, timeout_s: float = 10.0) -> int:
        """The forked child of ``unshare`` (PID 1 in the pod), read from ``/proc``."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout_s
        path = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children")
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"pod {self.spec.name} exited during start (code {self.proc.returncode}); see {self.log_path}"
                )
            try:
                children = path.read_text().split()
            except OSError:  # ENOENT, or ESRCH while unshare exits (the poll above reports it next time)
                children = []
            if children:
                return int(children[0])
            time.sleep(0.01)
        raise RuntimeError(f"pod {self.spec.name}: no PID 1 after {timeout_s} s")

    def poll(self) -> int | None:
        """The container's exit code once PID 1 has exited (128 + N when a signal N ended it), else None."""
        if self.proc is None or self.exit_code is not None:
            return self.exit_code
        rc = self.proc.poll()
        if rc is None:
            return None
        self.exit_code = 128 - rc if rc < 0 else rc
        self.finished_at = time.time()
        return self.exit_code

    def signal(self, sig: signal.Signals) -> None:
        """Send ``sig`` to the container's PID 1 (what ``kubectl delete pod`` sends first: SIGTERM)."""
        if self.init_pid is not None and self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, sig)

    def cut_network(self) -> None:
        if self.host_if is not None:
            self.network.cut(self.host_if)

    def kill(self) -> None:
        """SIGKILL every process of the pod: ``unshare`` dies, its child (PID 1) gets SIGKILL, the namespace ends."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=10)
        if self.init_pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.init_pid, signal.SIGKILL)
        self.poll()
