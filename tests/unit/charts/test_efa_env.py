import dataclasses

import pytest

from charts.efa_env import efa_nccl_env, to_env_vars, training_env
from platform_config import INSTANCE_TYPES, MODE_LAYERS, RecoveryMode


@pytest.mark.parametrize("name", sorted(INSTANCE_TYPES))
def test_every_family_gets_efa_and_nccl_basics(name):
    env = efa_nccl_env(INSTANCE_TYPES[name])
    assert env["FI_PROVIDER"] == "efa"
    assert env["NCCL_NVLS_ENABLE"] == "0"
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == "1"
    assert env["NCCL_SOCKET_IFNAME"] == "^docker,lo,veth"
    # fork-safe mode would switch libfabric's hugepages off, which the pod requests on purpose
    assert "FI_EFA_FORK_SAFE" not in env and "RDMAV_FORK_SAFE" not in env


def test_gpudirect_rdma_follows_the_instance_table():
    p5 = INSTANCE_TYPES["p5.48xlarge"]
    assert efa_nccl_env(p5)["FI_EFA_USE_DEVICE_RDMA"] == "1"
    assert "FI_EFA_USE_DEVICE_RDMA" not in efa_nccl_env(dataclasses.replace(p5, gpudirect_rdma=False))


@pytest.mark.parametrize("name", sorted(INSTANCE_TYPES))
def test_no_tuner_override_so_the_net_plugin_sets_up_its_own(name):
    # aws-ofi-nccl >= 1.16 carries its tuner inside libnccl-net-ofi.so; NCCL_TUNER_PLUGIN would replace it.
    assert "NCCL_TUNER_PLUGIN" not in efa_nccl_env(INSTANCE_TYPES[name])


@pytest.mark.parametrize("mode", list(RecoveryMode))
def test_training_env_store_port_and_inprocess_settings(cfg, mode):
    env = training_env(cfg, mode, cfg.instance)
    assert env["NVRX_INPROCESS_STORE_PORT"] == str(cfg.job.inprocess_store_port)
    assert env["NVRX_INPROCESS_STORE_PORT"] != str(cfg.job.rendezvous_port)
    assert ("TORCH_NCCL_RETHROW_CUDA_ERRORS" in env) == MODE_LAYERS[mode].inprocess
    # NCCL errors abort the process without the in-process layer, only the communicator with it
    assert env["TORCH_NCCL_ASYNC_ERROR_HANDLING"] == ("2" if MODE_LAYERS[mode].inprocess else "1")


def test_env_vars_are_sorted():
    names = [e.name for e in to_env_vars({"B": "1", "A": "2"})]
    assert names == ["A", "B"]
