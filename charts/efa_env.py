"""EFA / NCCL / PyTorch environment of a training container, per instance family and recovery mode."""

from __future__ import annotations

from cdk8s_plus_36 import k8s

from platform_config import MODE_LAYERS, InstanceType, ProjectConfig, RecoveryMode
from training.resilience.inprocess import INPROCESS_PROCESS_ENV


def efa_nccl_env(instance: InstanceType) -> dict[str, str]:
    """libfabric/NCCL settings for ``instance``'s family.

    ``FI_EFA_FORK_SAFE`` / ``RDMAV_FORK_SAFE`` are left unset on purpose: they turn libfabric's hugepage
    buffers off, and the pod requests ``hugepages-2Mi`` for exactly those (AL2023 kernels are fork-safe).

    ``NCCL_TUNER_PLUGIN`` is not set either: since aws-ofi-nccl 1.16 the tuner lives inside the net plugin
    (``/opt/amazon/ofi-nccl/lib/libnccl-net-ofi.so``), NCCL >= 2.21 loads it from there unless this variable names
    another library, and the plugin sets up its own tuner only when nothing overrides it (aws/aws-ofi-nccl#922).
    """
    env = {
        "FI_PROVIDER": "efa",
        "NCCL_SOCKET_IFNAME": "^docker,lo,veth",
        "NCCL_NVLS_ENABLE": "0",
        "NCCL_BUFFSIZE": "8388608",
        "NCCL_DEBUG": "WARN",
        "TORCH_NCCL_ASYNC_ERROR_HANDLING": "1",
    }
    if instance.gpudirect_rdma:
        env["FI_EFA_USE_DEVICE_RDMA"] = "1"
    return env


def training_env(cfg: ProjectConfig, mode: RecoveryMode, instance: InstanceType) -> dict[str, str]:
    """Everything the trainer container sets besides the downward-API variables."""
    env = efa_nccl_env(instance)
    env["NVRX_INPROCESS_STORE_PORT"] = str(cfg.job.inprocess_store_port)
    # Workers get a store of their own per generation (hosted by global rank 0 on a port the rendezvous picks), not
    # the rendezvous's long-lived store, whose keys would outlive a lost node's workers.
    env["TORCH_DISABLE_SHARE_RDZV_TCP_STORE"] = "1"
    if MODE_LAYERS[mode].inprocess:
        # NCCL errors must abort the communicator, not the process (the trainer sets these again, since
        # ft_launcher exports its own TORCH_NCCL_ASYNC_ERROR_HANDLING to workers).
        env.update(INPROCESS_PROCESS_ENV)
    return env


def to_env_vars(env: dict[str, str]) -> list[k8s.EnvVar]:
    """Sorted ``EnvVar`` list (stable manifests)."""
    return [k8s.EnvVar(name=k, value=v) for k, v in sorted(env.items())]
