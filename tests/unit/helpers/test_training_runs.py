"""The tests' own helpers (tests/helpers/training_runs.py): the ports they hand to real runs."""

from __future__ import annotations

import socket
from pathlib import Path

from tests.helpers.training_runs import free_port


def test_free_ports_are_distinct_bindable_and_outside_the_kernels_ephemeral_range() -> None:
    ephemeral = [int(x) for x in Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()]
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == 300
    assert all(20000 <= p < ephemeral[0] for p in ports), (min(ports), max(ports), ephemeral)
    for port in ports[:20]:
        with socket.socket() as s:
            s.bind(("", port))
