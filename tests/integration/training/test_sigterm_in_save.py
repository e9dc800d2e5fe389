"""SIGTERM reaching a rank inside a synchronous (DCP) save, in real torchrun processes (gloo) with a real signal.

DCP gathers every rank's error onto every rank. Before this was handled, both ranks exited 21 (a storage fault) and
the pod that was *not* stopped counted a failure against its index: the k8s-only cluster schedule's eviction, in CI.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.sigterm_in_save import sigterm_in_save

pytestmark = pytest.mark.integration


def test_the_stopped_rank_stops_and_its_peer_exits_as_a_lost_peer(tmp_path: Path) -> None:
    out = sigterm_in_save(tmp_path / "run")
    # rank 1 got its own SIGTERM back: a clean stop (exit 143), not a storage fault
    assert (out[1]["error_type"], out[1]["message"]) == (
        "Terminated",
        "SIGTERM: stopping at once, after this rank's in-flight checkpoint write",
    )
    # rank 0's own write was fine: it leaves as a lost peer (14), and its pod is not the one replaced
    assert (out[0]["error_type"], out[0]["cause"]) == ("CheckpointPeerError", "peer_lost"), out[0]
    assert out[0]["message"].startswith(
        "checkpoint at step 0 failed: rank 1 failed in the save, not this rank (Terminated: SIGTERM"
    ), out[0]
