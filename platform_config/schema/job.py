"""The Kubernetes Jobs (``job``, ``dataset_prep``): the training Job, its rendezvous and relaunch budget."""

from __future__ import annotations

from pydantic import Field, model_validator

from platform_config.schema.base import _Strict
from platform_config.schema.modes import RecoveryMode


class DatasetPrepConfig(_Strict):
    """The dataset-preparation Job (runs on the system nodes, before training)."""

    #: CPU cores and memory requested (= limits). Must fit in half a system node: the rest is for the node's
    #: DaemonSets, CoreDNS and the controllers.
    cpu: float = Field(default=2.0, gt=0)
    memory_gib: int = Field(default=8, ge=1)
    #: The Job fails after this long (``activeDeadlineSeconds``); ``make submit`` waits this long for it.
    active_deadline_seconds: int = Field(default=7200, ge=60)


class RendezvousConfig(_Strict):
    """The c10d rendezvous every launcher uses (hosted by the launcher of completion index 0)."""

    #: How long a launcher waits for every node to join a round (a replacement node included) before it gives up.
    join_timeout_s: float = Field(default=600.0, gt=0)
    #: How long one request to the rendezvous store may block: after a silent loss of the store's host (index 0)
    #: the other launchers notice within this time, then their supervisors relaunch them to rejoin the new host.
    read_timeout_s: float = Field(default=60.0, gt=0)
    #: After the minimum number of nodes joined, wait this long for more. Every launcher here asks for min = max
    #: nodes, so a round completes once all joined and this never delays a restart; torch's c10d handler needs a
    #: whole number of seconds > 0 (NVRx 0.7's barrier rendezvous applies it only to restart rounds with min < max).
    last_call_timeout_s: float = Field(default=1.0, ge=0)
    close_timeout_s: float = Field(default=30.0, gt=0)


class RelaunchBudget(_Strict):
    """How often a pod's supervisor may relaunch its launcher in place, counted in a sliding window.

    A relaunch follows a lost peer (another pod failed, or the rendezvous host went away) or, with ft_launcher, a
    launcher whose own restarts are used up. Counting within a window limits the fault *rate*, so a long run with
    rare faults never runs out; more than ``max_in_window`` relaunches within ``window_s`` ends the pod with the
    unrecoverable exit code (the Job fails, with the reason in the pod's log and ``exit_status.json``).
    """

    max_in_window: int = Field(default=10, ge=0)
    window_s: float = Field(default=3600.0, gt=0)
    #: Pause before a relaunch (lets the failed launcher's processes and sockets go away).
    delay_s: float = Field(default=1.0, ge=0)


class KubernetesJobConfig(_Strict):
    """The training Job's Kubernetes settings."""

    namespace: str = "training"
    job_name: str = "fsdp-train"
    service_account: str = "training"
    mode: RecoveryMode = RecoveryMode.INPROCESS_FT
    rendezvous_port: int = Field(default=29500, ge=1024, le=65535)
    inprocess_store_port: int = Field(default=29600, ge=1024, le=65535)
    #: Counted pod failures allowed per completion index (``backoffLimitPerIndex``). A lost node or an eviction
    #: is not counted (``DisruptionTarget`` -> Ignore), nor is a lost peer (the supervisor relaunches in place).
    backoff_limit: int = Field(default=3, ge=0, description="counted pod failures allowed per index")
    rendezvous: RendezvousConfig = Field(default_factory=RendezvousConfig)
    relaunch: RelaunchBudget = Field(default_factory=RelaunchBudget)
    #: Workers are forked by a per-pod template that imported the training code once (``training.launch.prefork``),
    #: so no worker start (a first launch, an ft_launcher restart, a relaunch) pays those imports; False: every
    #: worker is a fresh ``python -m training.train``.
    prefork_workers: bool = True
    #: ``tolerationSeconds`` for the ``node.kubernetes.io/not-ready`` and ``unreachable`` NoExecute taints: how long a
    #: training pod stays bound to a node that stopped answering before it is evicted (Kubernetes' default is 300 s;
    #: NCCL peers give up long before, so waiting longer only delays the replacement).
    node_failure_toleration_s: int = Field(default=60, ge=0)
    #: How long the pods that still run wait for a lost peer's replacement (any index, the rendezvous host's
    #: included) before the Job fails: the user's bound on a node loss, not the rendezvous join timeout, which a
    #: wait may pass many times (docs/kubernetes.md). A loss without a spare node takes 13+ minutes on EKS.
    lost_peer_deadline_s: float = Field(default=3600.0, gt=0)
    ttl_seconds_after_finished: int = Field(default=86400, ge=0)
    shm_size_gib: int = Field(default=64, ge=1)

    @model_validator(mode="after")
    def _ports(self) -> KubernetesJobConfig:
        if self.inprocess_store_port == self.rendezvous_port:
            raise ValueError("inprocess_store_port must differ from rendezvous_port")
        return self
