from charts.headless_service import HeadlessService
from charts.names import training_pod_labels
from platform_config import RecoveryMode
from tests.unit.charts.conftest import bare_chart, synth_job


def test_headless_service_selects_every_variant_and_publishes_unready(cfg):
    chart = bare_chart()
    HeadlessService(chart, "s", cfg)
    (svc,) = chart.to_json()
    spec = svc["spec"]
    assert spec["clusterIP"] == "None" and spec["publishNotReadyAddresses"] is True
    assert svc["metadata"]["namespace"] == cfg.job.namespace
    assert {p["port"] for p in spec["ports"]} == {cfg.job.rendezvous_port, cfg.job.inprocess_store_port}
    for mode in RecoveryMode:
        assert spec["selector"].items() <= training_pod_labels(cfg, mode).items()
        pod = synth_job(cfg, mode)["spec"]["template"]
        assert spec["selector"].items() <= pod["metadata"]["labels"].items()
        assert pod["spec"]["subdomain"] == svc["metadata"]["name"]
