"""Least-privilege security settings of the training and dataset-preparation pods.

The training container keeps exactly one Linux capability, ``IPC_LOCK``: libfabric's EFA provider pins (mlocks)
the buffers it registers with the NIC, and the NCCL/EFA stack expects to lock memory beyond the default
``RLIMIT_MEMLOCK``. Everything else is dropped. The dataset-preparation container needs no capability at all.

Both containers:

* ``capabilities.drop: [ALL]`` (``add`` only what is listed above),
* ``allowPrivilegeEscalation: false`` (no setuid gain, ``no_new_privs``),
* ``seccompProfile: RuntimeDefault`` (the container runtime's default syscall filter),
* ``privileged: false``.

They still run as uid 0: the FSx for Lustre root directory is owned by root, and a root process without
``CAP_DAC_OVERRIDE``/``CAP_CHOWN`` can only use files that root owns or that are world-accessible. Pods mount no
service-account token (:data:`AUTOMOUNT_SERVICE_ACCOUNT_TOKEN`): training and dataset preparation call no
Kubernetes API, and no AWS API either. The GPU nodes' IMDS hop limit of 1 keeps their node role out of the training
pods; the system nodes, where the dataset-preparation pod runs, keep the managed node group's default (2), so that pod
could reach the system node role (its worker, CNI, ECR read-only and SSM policies): setting 1 there needs a launch
template and a check that no add-on on those nodes takes its AWS credentials from instance metadata.

The training namespace's Pod Security admission level is set by ``stacks/fsx_storage.py`` (docs/infrastructure.md).
"""

from __future__ import annotations

from collections.abc import Sequence

from cdk8s_plus_36 import k8s

#: The one capability training keeps (EFA memory registration).
TRAINING_CAPABILITIES: tuple[str, ...] = ("IPC_LOCK",)
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
    """The training container's context: :func:`container_security_context` with ``IPC_LOCK`` only."""
    return container_security_context(TRAINING_CAPABILITIES)


def dataset_security_context() -> k8s.SecurityContext:
    """The dataset-preparation container's context: no capability at all."""
    return container_security_context()


def pod_security_context() -> k8s.PodSecurityContext:
    """Pod-level defaults: the runtime's default seccomp filter for every container (init containers included)."""
    return k8s.PodSecurityContext(seccomp_profile=k8s.SeccompProfile(type=SECCOMP_PROFILE))
