"""A rank's view of a failed peer, from the errors torch.distributed raised in recorded runs."""

from __future__ import annotations

import pytest

from training.common.peer_errors import is_peer_error


class DistBackendError(RuntimeError):
    """Named as torch.distributed's (the check goes by the type's name: no torch import here)."""


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("[gloo/transport/tcp/unbound_buffer.cc:129] Timed out waiting 3000ms for send operation"),
        RuntimeError("[gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.244.0.4]:41234"),
        RuntimeError("[Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE)"),
        DistBackendError("NCCL error in: ProcessGroupNCCL.cpp:1970, unhandled system error"),
        TimeoutError("store get"),
    ],
)
def test_what_a_survivor_of_a_failed_peer_sees(exc: BaseException) -> None:
    assert is_peer_error(exc)


@pytest.mark.parametrize(
    "exc",
    [OSError(28, "No space left on device"), RuntimeError("file write failed"), ValueError("injected fault at step 5")],
)
def test_a_rank_s_own_errors_are_not_a_peer_s(exc: BaseException) -> None:
    assert not is_peer_error(exc)
