"""Node-level fault schedules of the local cluster."""

from __future__ import annotations

import pytest

from training.cluster.node_faults import NodeFault, split_schedule


def test_node_faults_are_split_from_the_in_pod_schedule_and_sorted_by_step():
    faults, rest = split_schedule("evict@90:0, exception@70:2,node-loss@40:1,hang@80:0/checkpoint", pods=2)
    assert faults == [NodeFault("node-loss", 40, 1), NodeFault("evict", 90, 0)]
    assert rest == "exception@70:2,hang@80:0/checkpoint"
    assert str(faults[0]) == "node-loss@40:1"
    assert split_schedule("", pods=2) == ([], "")


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("node-loss@40", "expected node-loss@STEP:POD"),
        ("evict@x:1", "expected node-loss@STEP:POD"),
        ("node-loss@40:2", "pod index 2 is not below the 2 pods"),
    ],
)
def test_bad_node_faults_name_the_entry(spec, message):
    with pytest.raises(ValueError, match=message):
        split_schedule(spec, pods=2)
