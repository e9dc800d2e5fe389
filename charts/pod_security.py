"""Least-privilege security settings of the training and dataset-preparation pods: Pod Security ``baseline``.

Neither container adds a Linux capability. The training container used to add ``IPC_LOCK`` for EFA: the EFA driver
pins the memory libfabric registers and checks it against ``RLIMIT_MEMLOCK`` unless the process has
``CAP_IPC_LOCK`` (the kernel's ``ib_umem_get``); the EFA installer raises that limit to unlimited for the same
reason. The GPU nodes now give containerd, and so every container, an unlimited ``RLIMIT_MEMLOCK``
(``stacks/gpu_user_data.py``), so registration passes without the capability, and the training namespace enforces
Pod Security ``baseline``, which forbids ``IPC_LOCK`` (``stacks/fsx_storage.py``). Kubernetes' Pod Security
admission has no per-capability exemption, so keeping ``IPC_LOCK`` would have meant ``enforce: privileged`` plus a
hand-written copy of baseline. ``make preflight`` proves the choice on the nodes: its GPU probe runs with this
context and checks ``ulimit -l`` unlimited, and its nccl-tests run registers EFA memory with this context.

Both containers:

* ``capabilities.drop: [ALL]`` (``add`` only what is listed in :data:`TRAINING_CAPABILITIES`: nothing),
* ``allowPrivilegeEscalation: false`` (no setuid gain, ``no_new_privs``),
* ``seccompProfile: RuntimeDefault`` (the container runtime's default syscall filter),
* ``privileged: false``.

They still run as uid 0: the FSx for Lustre root directory is owned by root, and a root process without
``CAP_DAC_OVERRIDE``/``CAP_CHOWN`` can only use files that root owns or that are world-accessible (so not
``restricted``, which requires a non-root user). Pods mount no service-account token
(:data:`AUTOMOUNT_SERVICE_ACCOUNT_TOKEN`): training and dataset preparation call no Kubernetes API, and no AWS API
either. Every node has an IMDS hop limit of 1, so no pod reaches a node role.
"""

from __future__ import annotations

from collections.abc import Sequence

from cdk8s_plus_36 import k8s

#: Capabilities the training container adds: none (EFA registration relies on the node's unlimited memlock).
TRAINING_CAPABILITIES: tuple[str, ...] = ()
#: Capabilities Pod Security ``baseline`` lets a container add (Kubernetes "Pod Security Standards").
BASELINE_CAPABILITIES = frozenset(
    {
        "AUDIT_WRITE",
        "CHOWN",
        "DAC_OVERRIDE",
        "FOWNER",
        "FSETID",
        "KILL",
        "MKNOD",
        "NET_BIND_SERVICE",
        "SETFCAP",
        "SETGID",
        "SETPCAP",
        "SETUID",
        "SYS_CHROOT",
    }
)
#: Seccomp profile type of every container.
SECCOMP_PROFILE = "RuntimeDefault"
#: Pods mount no service-account token.
AUTOMOUNT_SERVICE_ACCOUNT_TOKEN = False


def container_security_context(add: Sequence[str] = ()) -> k8s.SecurityContext:
    """Drop every capability, add back ``add``, no privilege escalation, the runtime's default seccomp filter."""
    return k8s.SecurityContext(
        allow_privilege_escalation=False,
        privileged=False,
        capabilities=k8s.Capabilities(drop=["ALL"], add=list(add) or None),
        seccomp_profile=k8s.SeccompProfile(type=SECCOMP_PROFILE),
    )


def training_security_context() -> k8s.SecurityContext:
    """The training container's context: :func:`container_security_context` with :data:`TRAINING_CAPABILITIES`."""
    return container_security_context(TRAINING_CAPABILITIES)


def dataset_security_context() -> k8s.SecurityContext:
    """The dataset-preparation container's context: no capability at all."""
    return container_security_context()


def pod_security_context() -> k8s.PodSecurityContext:
    """Pod-level defaults: the runtime's default seccomp filter for every container (init containers included)."""
    return k8s.PodSecurityContext(seccomp_profile=k8s.SeccompProfile(type=SECCOMP_PROFILE))
