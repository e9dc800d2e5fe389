"""Run the training Job of one recovery mode on a local cluster: N pods x P CPU workers, from the real manifests.

``run_cluster()`` synthesizes the charts (``charts.main.build_app``, what ``cdk8s synth`` runs) for a local topology
(``nodes`` pods, ``nproc`` workers each) and the local config (``cfg.local`` timeouts, the in-pod fault schedule in
``faults.schedule``), then acts as the Job controller (:mod:`training.cluster.controller`) over pods that run the
Job's exact container command in namespaces (:mod:`training.cluster.sandbox`). Node faults
(:mod:`training.cluster.node_faults`) are fired when the run reaches their step.

Layout of ``run_dir`` (the training run directory, i.e. ``<mount_path>/runs/<job>`` on the claim):
``events.jsonl``, checkpoints, ``summary.json`` (written by rank 0), ``job.json`` (the Job's status, written here),
``pods/<pod>.log`` (each container's output) and ``.cluster/`` (manifests, ConfigMap files, the claim's root,
the pods' private file-system layers, removed at the end).
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import shutil
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from platform_config import ProjectConfig, RecoveryMode, config_from_dict
from platform_config.loader import deep_merge
from training.cluster.controller import BACKOFF_BASE_S, BACKOFF_MAX_S, JobController, PodRun
from training.cluster.eks_nodes import EksNodes
from training.cluster.image import REPO, LocalImage
from training.cluster.manifest import JobManifest, ManifestError, Manifests
from training.cluster.network import POD_CIDR, ClusterNetwork, DnsRecords, PodRecord
from training.cluster.node_faults import NodeFault, split_schedule
from training.cluster.node_timeline import EksTimeline
from training.cluster.pods import Storage, container_env, driver_mounts, volume_mounts
from training.cluster.sandbox import PodSandbox, PodSpec
from training.common.files import atomic_write_json
from training.common.gpus import cuda_device_count, driver_library_dir
from training.launch.prefork import ZYGOTE_ENV
from training.resilience.restarts import record_node_fault
from training.telemetry.events import EventLog
from training.telemetry.progress import EventTail, describe

JOB_STATUS_FILE = "job.json"
LOCAL_CORPUS_MB = 1.0
STATE_DIR = ".cluster"
#: Where a pod finds the caller's template (``ClusterOptions.template``), bound from the host.
ZYGOTE_IN_POD = "/run/training-prefork-zygote.sock"


@dataclass
class ClusterOptions:
    """One local cluster run. Times are seconds; ``backoff_scale`` scales Kubernetes' 10 s .. 6 min back-off."""

    run_dir: Path
    nodes: int
    nproc: int
    steps: int
    mode: RecoveryMode
    faults: str = ""
    node_replace_s: float = 5.0
    backoff_scale: float = 0.1
    timeout_s: float = 900.0
    progress_every: int = 20
    overrides: dict[str, Any] = field(default_factory=dict)
    #: ``image.nvrx_version`` of the manifests (its ft_launcher flags); None = the installed NVRx's.
    nvrx_version: str | None = None
    #: Manifests synthesized earlier (``--synth-only``) to run instead of synthesizing: for a host without cdk8s
    #: (jsii needs Node). Refused unless they were synthesized from this run's config.
    manifests: Path | None = None
    #: The CUDA devices of the host the manifests are for (its local timeouts: ``local.cuda_timeout_scale``); None =
    #: this host's. For ``--synth-only`` on a machine with Node for a GPU host without it.
    host_gpus: int | None = None
    #: A worker template the caller keeps (``training.local --template``): each pod's template is forked from it into
    #: the pod (:mod:`training.launch.prefork`'s warm pods) instead of importing the training code. For the test
    #: suite: a replacement pod is then ready seconds sooner than a real one, so recovery times are not the cluster's.
    template: str | None = None
    #: ``fast``: a lost node's replacement may start ``node_replace_s`` later; ``eks``: the EKS timeline
    #: (:mod:`training.cluster.node_timeline`) with ``timeline``'s durations and ``spare_nodes`` spare GPU nodes.
    node_timeline: str = "fast"
    spare_nodes: int = 0
    timeline: EksTimeline = field(default_factory=EksTimeline)
    #: Progress lines count seconds from here (the dataset Job and the training Job on one clock).
    t0: float = field(default_factory=time.monotonic)


def local_cluster_config(cfg: ProjectConfig, opts: ClusterOptions, in_pod_faults: str) -> ProjectConfig:
    """The config the local Job runs with: ``nodes`` GPU nodes, the local (short) timeouts and rendezvous (scaled on a
    host with GPUs: ``opts.host_gpus``, else this one's), the in-pod faults, a 1 MB generated corpus, the installed
    NVRx's version (its ft_launcher flags), plus ``opts.overrides`` (a nested dict, validated)."""
    from training.resilience.inprocess import nvrx_version
    from training.resilience.startup_budget import local_timeouts

    gpus = cuda_device_count() if opts.host_gpus is None else opts.host_gpus
    inprocess, ft, budget_lines = local_timeouts(cfg, cuda=gpus > 0)
    for line in budget_lines[1:]:  # what was raised (training.local prints the derivation)
        print(f"[budget] {line}", flush=True)
    data = cfg.model_dump(mode="json")
    update = {
        "gpu_nodes": {"node_count": opts.nodes, "min_nodes": 0, "max_nodes": max(opts.nodes, cfg.gpu_nodes.max_nodes)},
        # The dataset Job generates the corpus of a fresh cluster; 1 MB is what a local run's model needs.
        "train": {"steps": opts.steps, "generated_corpus_mb": LOCAL_CORPUS_MB},
        "inprocess": inprocess.model_dump(mode="json"),
        "ft": ft.model_dump(mode="json"),
        "faults": {"schedule": in_pod_faults},
        "image": {"nvrx_version": opts.nvrx_version or nvrx_version()},
        "job": {"mode": opts.mode.value, "rendezvous": cfg.local.rendezvous.model_dump(mode="json")},
    }
    return config_from_dict(deep_merge(deep_merge(data, update), opts.overrides), source="local cluster")


def synthesize(cfg: ProjectConfig, nproc: int, outdir: Path, prebuilt: Path | None = None) -> Manifests:
    """``charts.main.build_app`` for ``nproc`` workers per pod, written to ``outdir`` and read back; or, with
    ``prebuilt``, the manifests of that directory, refused unless their ConfigMap's name (it carries a hash of the
    resolved config) is ``cfg``'s."""
    if prebuilt is not None:
        return _prebuilt(cfg, prebuilt, outdir)
    os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")  # jsii's banner on Node 20
    from charts.main import build_app
    from charts.topology import Topology

    topology = Topology(nodes=cfg.gpu_nodes.node_count, instance=dataclasses.replace(cfg.instance, gpus=nproc))
    if outdir.exists():
        shutil.rmtree(outdir)
    build_app(cfg, str(outdir), environ={}, topology=topology, fit_timeouts=False).synth()
    return Manifests.load(outdir)


def _prebuilt(cfg: ProjectConfig, prebuilt: Path, outdir: Path) -> Manifests:
    from charts.names import config_map_name

    if not prebuilt.is_dir() or not any(prebuilt.glob("*.yaml")):
        raise ManifestError(f"--manifests {prebuilt}: no synthesized manifests (*.yaml) there")
    manifests = Manifests.load(prebuilt)
    want = config_map_name(cfg)
    if want not in manifests.config_maps:
        raise ManifestError(
            f"--manifests {prebuilt} were synthesized from another config: this run's ConfigMap would be {want}, "
            f"they hold {', '.join(sorted(manifests.config_maps)) or 'none'}; synthesize them with the same flags "
            "and --synth-only"
        )
    if outdir.exists():
        shutil.rmtree(outdir)
    shutil.copytree(prebuilt, outdir)  # beside the run, as a synthesized run keeps its own
    return manifests


class LocalCluster:
    """The controller loop: creates pods, watches them, fires node faults, writes ``job.json``."""

    def __init__(
        self,
        opts: ClusterOptions,
        cfg: ProjectConfig,
        job: JobManifest,
        manifests: Manifests,
        network: ClusterNetwork,
        nodes: Iterator[int],
    ) -> None:
        from charts.names import run_dir as pod_run_dir

        self.opts = opts
        self.cfg = cfg
        self.job = job
        self.state = opts.run_dir / STATE_DIR
        self.controller = JobController(
            job,
            backoff_base_s=BACKOFF_BASE_S * opts.backoff_scale,
            backoff_max_s=BACKOFF_MAX_S * opts.backoff_scale,
        )
        self.image = LocalImage.from_dockerfile(REPO / "training" / "Dockerfile", REPO)
        claim_dir = self.state / "claims" / cfg.storage.pvc_name
        claim_dir.mkdir(parents=True, exist_ok=True)
        cm_dirs = {}
        for name, data in manifests.config_maps.items():
            d = self.state / "configmaps" / name
            d.mkdir(parents=True, exist_ok=True)
            for key, value in data.items():
                (d / key).write_text(value)
            cm_dirs[name] = d
        # The run directory on the claim is this run's --run-dir, so events and summary land where the caller looks.
        extra = ((pod_run_dir(cfg, opts.mode), opts.run_dir),)
        if opts.template is not None:  # the caller's template, where each pod's template asks for a fork
            extra += ((ZYGOTE_IN_POD, Path(opts.template)),)
        self.storage = Storage({cfg.storage.pvc_name: claim_dir}, cm_dirs, extra)
        if job.subdomain is not None and job.subdomain not in manifests.headless_services:
            raise ManifestError(f"pod subdomain {job.subdomain!r} names no headless Service: pods would get no DNS")
        self.network = network
        self.dns = DnsRecords(self.state / "dns")
        self.sandboxes: dict[str, PodSandbox] = {}
        self.evict_deadline: dict[str, float] = {}
        self.lost: set[str] = set()
        self.events = EventLog(opts.run_dir)
        self.tail = EventTail(opts.run_dir)
        self.t0 = opts.t0
        self.nodes = nodes  # node numbers, shared by the Jobs of one run (each pod on a node of its own)
        self.status_file = JOB_STATUS_FILE if job.indexed else f"{job.name}.job.json"
        self.host_gpus = cuda_device_count()
        self.driver_dir = driver_library_dir() if self.host_gpus else None
        self.zygote_env = {ZYGOTE_ENV: ZYGOTE_IN_POD} if opts.template is not None else {}
        self.eks: EksNodes | None = None
        if opts.node_timeline == "eks" and job.indexed:
            budgets = [b for b in manifests.budgets.values() if b.match_labels.items() <= job.labels.items()]
            self.eks = EksNodes(
                opts.timeline,
                job,
                budgets[0] if budgets else None,
                spares=opts.spare_nodes,
                start=time.time(),
                say=self._say,
            )

    # -- pods ---------------------------------------------------------------------------------------------------
    def _start_pod(self, index: int, now: float) -> None:
        node = self.eks.place(index, now) if self.eks is not None else f"local-node-{next(self.nodes)}"
        if node is None:
            return  # Pending: no free node
        pod = self.controller.create(index, now, node=node)
        if self.eks is not None:
            self.eks.bind(pod, node)
        ip = self.network.allocate()
        # An Indexed Job's pod is named <job>-<index> as a host (its DNS label under the subdomain); others: the pod.
        hostname = f"{self.job.name}-{index}" if self.job.indexed else pod.name
        spec = PodSpec(
            name=pod.name,
            hostname=hostname,
            ip=ip,
            prefix_len=POD_CIDR.prefixlen,
            argv=self.job.container.argv,
            env=container_env(self.job, pod, ip, hostname, self.image, self.host_gpus, self.driver_dir)
            | self.zygote_env,
            workdir=self.job.container.working_dir or self.image.workdir,
            mounts=volume_mounts(self.job, self.storage, self.image)
            + driver_mounts(self.job, self.host_gpus, self.driver_dir),
            dns_dir=self.dns.directory,
        )
        if self.job.subdomain is not None:
            self.dns.publish(pod.name, PodRecord(ip, hostname, self.job.subdomain, self.job.namespace))
        log = self.opts.run_dir / "pods" / f"{pod.name}.log"
        sandbox = PodSandbox(spec, self.state / "pods" / pod.name, self.network, log)
        sandbox.start()
        self.sandboxes[pod.name] = sandbox
        self._say(f"JOB   pod {pod.name} (index {index}, attempt {pod.attempt}) started on {pod.node} at {ip}")

    def _pod_of(self, index: int) -> PodRun | None:
        pod = self.controller.indexes[index].pod
        return pod if pod is not None and pod.finished_at is None else None

    def _reap(self, now: float) -> None:
        for pod in list(self.controller.active()):
            if pod.finished_at is not None or (self.eks is not None and pod.name in self.eks.lost_pods):
                continue
            sandbox = self.sandboxes[pod.name]
            rc = sandbox.poll()
            if rc is None:
                deadline = self.evict_deadline.get(pod.name)
                if deadline is not None and now >= deadline:
                    sandbox.kill()
                continue
            action = self.controller.terminated(pod, rc, now)
            self.dns.withdraw(pod.name)
            if self.eks is not None:
                self.eks.ended(pod, now)
            self._say(f"JOB   pod {pod.name} exited {rc}: podFailurePolicy action {action}")
            self._write_status()

    # -- node faults --------------------------------------------------------------------------------------------
    def _fire(self, fault: NodeFault, now: float) -> bool:
        pod = self._pod_of(fault.pod)
        if pod is None:
            return False  # the index has no running pod now; fire when it has one again
        sandbox = self.sandboxes[pod.name]
        ranks = list(range(fault.pod * self.opts.nproc, (fault.pod + 1) * self.opts.nproc))
        record_node_fault(self.opts.run_dir, str(fault), time.time_ns())  # the cause the restarted ranks report
        self.events.emit(
            "fault_injected",
            kind=fault.kind,
            step=self.tail.max_step + 1,
            fault_rank=ranks[0],
            ranks=ranks,
            pod=fault.pod,
            phase="step",
            scheduled=str(fault),
            emit_layer="job",
        )
        if self.eks is not None:
            self._fire_eks(fault, pod, now)
        elif fault.kind in ("node-loss", "node-hang"):
            sandbox.cut_network()
            sandbox.kill()
            self.controller.disrupted(pod, "DeletionByTaintManager")
            self.controller.terminated(pod, None, now, terminal_at=now + self.opts.node_replace_s)
            self.dns.withdraw(pod.name)
            self._say(
                f"JOB   node {pod.node} lost with pod {pod.name}; its replacement can start in "
                f"{self.opts.node_replace_s:g} s"
            )
        else:
            self._evict(pod, now)
        self._write_status()
        return True

    def _evict(self, pod: PodRun, now: float) -> None:
        """An eviction the API admitted: ``DisruptionTarget``, SIGTERM, SIGKILL after the grace period."""
        self.controller.disrupted(pod, "EvictionByEvictionAPI")
        self.sandboxes[pod.name].signal(signal.SIGTERM)
        self.evict_deadline[pod.name] = now + self.job.termination_grace_s
        self._say(f"JOB   pod {pod.name} evicted: SIGTERM, {self.job.termination_grace_s} s grace")

    def _fire_eks(self, fault: NodeFault, pod: PodRun, now: float) -> None:
        assert self.eks is not None
        if fault.kind == "evict":  # a drain by the termination handler, through the Eviction API
            if self.eks.drain(str(fault), pod, now, self.eks.unavailable(self.controller)):
                self._evict(pod, now)
            return
        if fault.kind == "gpu-fault":  # the node stays Ready; _tick_eks kills the pods that run on it
            self.eks.gpu_fault(str(fault), pod, now)
            return
        self._node_gone(str(fault), pod, now, instance="hung" if fault.kind == "node-hang" else "terminated")

    def _node_gone(self, fault: str, pod: PodRun, now: float, *, instance: str) -> None:
        """The pod's node stops answering: its link goes down, its processes die, the EKS timeline takes over."""
        assert self.eks is not None
        sandbox = self.sandboxes[pod.name]
        sandbox.cut_network()
        sandbox.kill()
        self.dns.withdraw(pod.name)
        self.eks.lose(fault, pod, now, instance=instance)

    def _tick_eks(self, now: float) -> None:  # the control plane up to now, and what it asks of the pods
        actions = self.eks.step(now, self.controller) if self.eks is not None else []
        for action, pod, why in actions:
            if action == "evict":
                self._evict(pod, now)
            elif action == "kill":  # a GPU fault on its node: the container fails on its own (counted)
                self.sandboxes[pod.name].kill()
            else:
                self._node_gone(why, pod, now, instance="terminated")
        if actions or (self.eks is not None and self.eks.changed):
            self._write_status()

    # -- loop ---------------------------------------------------------------------------------------------------
    def run(self, node_faults: list[NodeFault]) -> dict[str, Any]:
        pending = list(node_faults)
        limit = min(self.opts.timeout_s, self.job.active_deadline_s or self.opts.timeout_s)
        deadline = time.time() + limit
        try:
            while not self.controller.finished:
                now = time.time()
                for index in self.controller.due(now):
                    self._start_pod(index, now)
                for e in self.tail.poll():
                    if self.eks is not None:
                        self.eks.event(e, self.opts.nproc)
                    line = describe(e, self.opts.progress_every, self.opts.steps)
                    if line is not None:
                        self._say(line)
                for fault in [f for f in pending if self.tail.max_step >= f.step]:
                    if self._fire(fault, now):
                        pending.remove(fault)
                self._reap(now)
                if self.eks is not None:
                    self._tick_eks(now)
                if now > deadline:
                    self.controller.fail(now, "DeadlineExceeded", f"Job was active longer than {limit:g} s")
                time.sleep(0.1)
            self._terminate_all()
        finally:
            for sandbox in self.sandboxes.values():
                sandbox.kill()
            self._write_status()
        return self.controller.status()

    def _terminate_all(self) -> None:
        """The Job ended: SIGTERM every pod still running, SIGKILL after its grace period (as pod deletion does)."""
        running = [p for p in self.controller.active() if p.finished_at is None]
        for pod in running:
            self.sandboxes[pod.name].signal(signal.SIGTERM)
        end = time.time() + self.job.termination_grace_s
        while running and time.time() < end:
            running = [p for p in running if self.sandboxes[p.name].poll() is None]
            time.sleep(0.1)
        for pod in running:
            self.sandboxes[pod.name].kill()
        for pod in self.controller.active():
            if pod.finished_at is None:
                self.controller.terminated(pod, self.sandboxes[pod.name].poll(), time.time())

    def _write_status(self) -> None:
        status = self.controller.status()
        if self.eks is not None:
            status["nodeLosses"] = self.eks.report()
        atomic_write_json(self.opts.run_dir / self.status_file, status)

    def _say(self, text: str) -> None:
        print(f"[{time.monotonic() - self.t0:6.1f}s] {text}", flush=True)


def prepare_manifests(cfg: ProjectConfig, opts: ClusterOptions) -> tuple[ProjectConfig, Manifests, Path]:
    """The local config, its manifests (synthesized, or ``opts.manifests`` checked) and their directory."""
    from charts.names import job_name

    local_cfg = local_cluster_config(cfg, opts, split_schedule(opts.faults, opts.nodes)[1])
    state = opts.run_dir / STATE_DIR
    state.mkdir(parents=True, exist_ok=True)
    (state / "config.json").write_text(json.dumps(local_cfg.model_dump(mode="json"), indent=1, sort_keys=True))
    manifests = synthesize(local_cfg, opts.nproc, state / "manifests", opts.manifests)
    name = job_name(local_cfg, opts.mode)
    if name not in manifests.jobs:
        raise ManifestError(f"no Job {name!r} among the synthesized manifests ({', '.join(manifests.jobs)})")
    return local_cfg, manifests, state / "manifests"


def run_cluster(cfg: ProjectConfig, opts: ClusterOptions) -> dict[str, Any]:
    """Synthesize; run the dataset-preparation Job to its end, then the training Job (what ``make submit`` does);
    clean the pods' layers. Returns the training Job's status (also in ``job.json``)."""
    from charts.names import dataset_job_name, job_name

    node_faults = split_schedule(opts.faults, opts.nodes)[0]
    if opts.node_timeline != "eks" and any(f.kind == "gpu-fault" for f in node_faults):
        raise ValueError("gpu-fault needs --node-timeline eks (a GPU fault on a node that stays Ready)")
    local_cfg, manifests, _ = prepare_manifests(cfg, opts)
    state = opts.run_dir / STATE_DIR
    name = job_name(local_cfg, opts.mode)
    network = ClusterNetwork()
    network.start()
    nodes = itertools.count(1)
    try:
        prep = manifests.jobs.get(dataset_job_name(local_cfg))
        if prep is not None:
            status = LocalCluster(opts, local_cfg, prep, manifests, network, nodes).run([])
            cond = status["conditions"][-1] if status["conditions"] else {}
            if cond.get("type") != "Complete":
                raise RuntimeError(
                    f"the dataset-preparation Job {prep.name} did not complete: {cond}; see {opts.run_dir / 'pods'}"
                )
        return LocalCluster(opts, local_cfg, manifests.jobs[name], manifests, network, nodes).run(node_faults)
    finally:
        network.close()
        shutil.rmtree(state / "pods", ignore_errors=True)
