"""The image pre-pull DaemonSet: on exactly the training pods' nodes, pulling the training image, holding nothing."""

from __future__ import annotations

from charts.image_prepull import ImagePrepull
from charts.node_placement import NODE_FAILURE_TAINTS
from platform_config import RecoveryMode
from tests.unit.charts.conftest import bare_chart, synth_job


def test_the_daemonset_pulls_the_training_image_on_the_training_nodes_and_only_holds_it(cfg):
    chart = bare_chart()
    ImagePrepull(chart, "p", cfg, image="123.dkr.ecr.us-west-2.amazonaws.com/train:abc")
    (ds,) = chart.to_json()
    assert (ds["apiVersion"], ds["kind"], ds["metadata"]["name"]) == (
        "apps/v1",
        "DaemonSet",
        "fsdp-train-image-prepull",
    )
    pod = ds["spec"]["template"]["spec"]
    job_pod = synth_job(cfg, RecoveryMode.INPROCESS_FT)["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == job_pod["nodeSelector"]
    assert pod["tolerations"] == [t for t in job_pod["tolerations"] if t["key"] not in NODE_FAILURE_TAINTS]
    image = "123.dkr.ecr.us-west-2.amazonaws.com/train:abc"
    (pull,) = pod["initContainers"]
    assert (pull["image"], pull["imagePullPolicy"], pull["command"]) == (image, "IfNotPresent", ["true"])
    (hold,) = pod["containers"]
    assert (hold["image"], hold["imagePullPolicy"], hold["command"]) == (image, "IfNotPresent", ["sleep", "infinity"])
    for c in (pull, hold):
        assert c["resources"]["requests"] == c["resources"]["limits"] == {"cpu": "10m", "memory": "16Mi"}
        assert c["securityContext"]["capabilities"] == {"drop": ["ALL"]}
    assert pod["automountServiceAccountToken"] is False
    assert ds["spec"]["selector"]["matchLabels"] == ds["spec"]["template"]["metadata"]["labels"]
