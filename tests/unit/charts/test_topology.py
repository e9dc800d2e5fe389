import dataclasses

import pytest

from charts.topology import Topology
from tests.unit.charts.conftest import make_cfg


def test_from_config_uses_node_count_and_instance_row():
    cfg = make_cfg(gpu_nodes={"node_count": 3, "max_nodes": 4, "instance_type": "p4de.24xlarge"})
    topo = Topology.from_config(cfg)
    assert (topo.nodes, topo.nproc_per_node, topo.world_size) == (3, 8, 24)
    assert topo.instance.name == "p4de.24xlarge"


def test_explicit_instance_overrides_gpus(cfg):
    topo = Topology.from_config(cfg, dataclasses.replace(cfg.instance, gpus=3))
    assert topo.world_size == cfg.gpu_nodes.node_count * 3


@pytest.mark.parametrize("nodes", [0, -1])
def test_rejects_empty_topology(cfg, nodes):
    with pytest.raises(ValueError, match="nodes must be >= 1"):
        Topology(nodes=nodes, instance=cfg.instance)
