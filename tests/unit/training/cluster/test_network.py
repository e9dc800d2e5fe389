"""The cluster's DNS records: one hosts file, replaced atomically."""

from __future__ import annotations

from training.cluster.network import DnsRecords, PodRecord


def test_records_are_published_and_withdrawn(tmp_path):
    dns = DnsRecords(tmp_path / "dns")
    dns.publish("pod-a", PodRecord("10.244.0.2", "train-0", "train", "training"))
    dns.publish("pod-b", PodRecord("10.244.0.3", "train-1", "train", "training"))
    lines = (tmp_path / "dns" / "hosts").read_text().splitlines()
    assert lines[0] == "127.0.0.1\tlocalhost"
    assert lines[2] == (
        "10.244.0.2\ttrain-0.train.training.svc.cluster.local train-0.train.training train-0.train train-0"
    )
    dns.withdraw("pod-a")
    dns.withdraw("pod-a")  # twice is harmless
    text = (tmp_path / "dns" / "hosts").read_text()
    assert "train-0" not in text and "10.244.0.3\ttrain-1.train" in text
    assert [p.name for p in (tmp_path / "dns").iterdir()] == ["hosts"]  # no temporary file left behind
