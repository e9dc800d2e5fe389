"""Pods as namespaces, for real (root, ``unshare``, ``ip``): hostname, DNS, private /tmp, shared claim, PID 1, network.

Two pods run a small Python program: pod 0 listens, pod 1 connects to ``train-0.train`` through the cluster's DNS
records. Then a node loss (link down, SIGKILL of PID 1) is compared with an eviction-style SIGTERM.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from training.cluster.network import POD_CIDR, ClusterNetwork, DnsRecords, PodRecord
from training.cluster.sandbox import Mount, PodSandbox, PodSpec

PROGRAM = """
import os, signal, socket, sys, time
index = int(sys.argv[1])
print("host", socket.gethostname(), socket.gethostbyname("train-0.train"), os.getpid(), flush=True)
open(f"/claim/pod{index}", "w").write("shared")
open("/tmp/private", "w").write(str(index))
open("/dev/shm/x", "w").write("memory")
signal.signal(signal.SIGTERM, lambda *_: sys.exit(77))
if index == 0:
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("0.0.0.0", 29500)); s.listen()
    conn, _ = s.accept()
    print("got", conn.recv(5).decode(), flush=True)
else:
    for _ in range(100):
        try:
            conn = socket.create_connection(("train-0.train", 29500), timeout=1); break
        except OSError:
            time.sleep(0.1)
    conn.send(b"hello")
    print("sent", flush=True)
time.sleep(60)
"""


def _wait_for(path: Path, text: str, timeout_s: float = 20.0) -> str:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        content = path.read_text() if path.exists() else ""
        if text in content:
            return content
        time.sleep(0.05)
    raise AssertionError(f"{text!r} not in {path}: {path.read_text() if path.exists() else '(no log)'}")


@pytest.fixture
def network():
    net = ClusterNetwork()
    net.start()
    yield net
    net.close()


def test_two_pods_talk_through_cluster_dns_with_private_and_shared_files(tmp_path, network):
    dns = DnsRecords(tmp_path / "dns")
    claim = tmp_path / "claim"
    claim.mkdir()
    pods = []
    for index in (0, 1):
        ip = network.allocate()
        dns.publish(f"p{index}", PodRecord(ip, f"train-{index}", "train", "training"))
        spec = PodSpec(
            name=f"p{index}",
            hostname=f"train-{index}",
            ip=ip,
            prefix_len=POD_CIDR.prefixlen,
            argv=[sys.executable, "-c", PROGRAM, str(index)],
            env={"PATH": "/usr/bin:/bin"},
            workdir="/",
            mounts=[Mount("/claim", "bind", claim), Mount("/dev/shm", "tmpfs", size_bytes=1 << 20)],
            dns_dir=dns.directory,
        )
        pod = PodSandbox(spec, tmp_path / f"pod{index}", network, tmp_path / f"pod{index}.log")
        pod.start()
        pods.append(pod)
    try:
        log0 = _wait_for(tmp_path / "pod0.log", "got hello")
        log1 = _wait_for(tmp_path / "pod1.log", "sent")
        first_ip = network.gateway.rsplit(".", 1)[0] + ".2"
        assert log0.startswith(f"host train-0 {first_ip} 1\n")  # its hostname, cluster DNS, PID 1 of its namespace
        assert log1.startswith(f"host train-1 {first_ip} 1\n")
        assert sorted(p.name for p in claim.iterdir()) == ["pod0", "pod1"]  # the claim is shared
        assert not Path("/tmp/private").exists() and not Path("/dev/shm/x").exists()  # /tmp and emptyDir are not
        pods[1].signal(signal.SIGTERM)  # PID 1 with a SIGTERM handler: exits as it chose (an eviction's first step)
        deadline = time.monotonic() + 10
        while pods[1].poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert pods[1].poll() == 77
        pods[0].cut_network()
        pods[0].kill()  # a lost node: every process of the pod ends with SIGKILL
        assert pods[0].poll() == 128 + signal.SIGKILL
    finally:
        for pod in pods:
            pod.kill()


def test_a_pods_template_forked_from_one_outside_it_runs_its_workers_in_the_pod(tmp_path, network):
    """Warm pods (``training.local --nodes --template``): the template outside the pod forks the pod's template into
    the pod's namespaces and root, through a socket bound into the pod, and the workers it forks are the pod's:
    its hostname, PIDs of its namespace, its private /tmp."""
    from tests.helpers.training_runs import REPO_ROOT, child_env

    zygote = tmp_path / "zygote.sock"
    argv = [sys.executable, "-m", "training.launch.prefork", "serve", "--socket", str(zygote), "--warm", "json"]
    outside = subprocess.Popen(argv, cwd=REPO_ROOT, env=child_env(), stdout=subprocess.PIPE, text=True)
    script = (
        "python -m training.launch.prefork serve --socket /tmp/t.sock & export TRAINING_PREFORK_SOCKET=/tmp/t.sock; "
        "python -m training.launch.prefork run tests.helpers.prefork_payload where; echo payload-exit $?; sleep 60"
    )
    spec = PodSpec(
        name="p0",
        hostname="train-0",
        ip=network.allocate(),
        prefix_len=POD_CIDR.prefixlen,
        argv=["bash", "-c", script],
        env={**child_env(), "TRAINING_PREFORK_ZYGOTE": "/run/zygote.sock"},
        workdir=str(REPO_ROOT),
        mounts=[Mount("/run/zygote.sock", "bind", zygote)],
    )
    pod = PodSandbox(spec, tmp_path / "pod0", network, tmp_path / "pod0.log")
    try:
        assert outside.stdout is not None and "ready" in outside.stdout.readline()
        pod.start()
        log = _wait_for(tmp_path / "pod0.log", "payload-exit")
    finally:
        pod.kill()
        outside.terminate()
        outside.wait(timeout=10)
    ready = next(x for x in log.splitlines() if x.startswith("[prefork] template "))
    assert ready.endswith(" ready at /tmp/t.sock (forked into this pod from the template at /run/zygote.sock)"), log
    template_pid = int(ready.split()[2])
    assert 1 < template_pid < 20  # numbered in the pod's PID namespace, not this host's
    assert f"ppid={template_pid} argv=['where']" in log and "payload host=train-0\n" in log, log
    assert "payload-exit 0\n" in log and "cold start" not in log
    assert not Path("/tmp/t.sock").exists()  # the template's socket is in the pod's /tmp, not this host's
