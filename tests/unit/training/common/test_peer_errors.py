"""A rank's view of a failed peer, from the errors torch.distributed raised in recorded runs."""

from __future__ import annotations

import pytest

from training.common.peer_errors import is_peer_error, lost_peer_behind


class DistBackendError(RuntimeError):
    """Named as torch.distributed's (the check goes by the type's name: no torch import here)."""


@pytest.mark.parametrize(
    "exc",
    [
        RuntimeError("[gloo/transport/tcp/unbound_buffer.cc:129] Timed out waiting 3000ms for send operation"),
        RuntimeError("[gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.244.0.4]:41234"),
        RuntimeError("Application timeout caused pair closure"),  # a relaunched k8s-only rank, its peer's pod gone
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


def _raised_from(outer: BaseException, inner: BaseException) -> BaseException:
    try:
        try:
            raise inner
        except BaseException as e:
            raise outer from e
    except BaseException as e:
        return e


class CheckpointException(RuntimeError):
    """Shaped as DCP's: each rank's error under ``failures`` as (exception, traceback)."""

    def __init__(self, failures: dict[int, tuple[BaseException, object]]) -> None:
        super().__init__("CheckpointException ranks:" + ",".join(map(str, failures)))
        self.failures = failures


def test_a_save_that_lost_its_peer_has_the_peer_behind_it() -> None:
    gloo = RuntimeError("[gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 3000ms for send operation")
    assert lost_peer_behind(_raised_from(RuntimeError("checkpoint of step 25 failed"), gloo))
    dcp = CheckpointException({1: (RuntimeError("Connection closed by peer [10.244.0.4]:4123"), None)})
    assert lost_peer_behind(_raised_from(RuntimeError("checkpoint of step 25 failed"), dcp))


def test_a_storage_error_stays_one_even_when_it_says_timed_out() -> None:
    """FSx's ETIMEDOUT is the storage's failure, not a peer's; a plain ENOSPC has no peer behind it."""
    assert not lost_peer_behind(_raised_from(RuntimeError("save failed"), OSError(110, "Connection timed out")))
    assert not lost_peer_behind(_raised_from(RuntimeError("save failed"), OSError(28, "No space left on device")))
    assert not lost_peer_behind(RuntimeError("file write failed"))
