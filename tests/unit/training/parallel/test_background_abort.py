"""The failed iteration's abort on a thread of its own (``training.parallel.background_abort``): real threads, known
delays."""

from __future__ import annotations

import threading
import time

import pytest

from training.parallel import background_abort


@pytest.fixture(autouse=True)
def _nothing_left_running() -> None:
    yield
    background_abort.await_abort(5.0)


def test_the_abort_runs_beside_the_caller_and_the_wait_returns_when_it_is_done() -> None:
    done = threading.Event()
    t0 = time.monotonic()
    background_abort.abort_in_background(lambda: (time.sleep(0.3), done.set()))
    assert time.monotonic() - t0 < 0.1  # the monitor thread goes on at once
    assert not done.is_set()
    waited = background_abort.await_abort(5.0)
    assert done.is_set() and 0.15 < waited < 2.0
    assert background_abort.await_abort(5.0) == 0.0  # nothing left to wait for


def test_without_an_abort_there_is_nothing_to_wait_for() -> None:
    assert background_abort.await_abort(0.0) == 0.0


def test_a_second_abort_starts_after_the_first_one() -> None:
    order: list[str] = []
    background_abort.abort_in_background(lambda: (time.sleep(0.2), order.append("first")))
    background_abort.abort_in_background(lambda: order.append("second"))
    background_abort.await_abort(5.0)
    assert order == ["first", "second"]


def test_an_abort_past_the_deadline_is_a_timeout(capsys: pytest.CaptureFixture) -> None:
    release = threading.Event()
    background_abort.abort_in_background(release.wait)
    with pytest.raises(TimeoutError, match=r"still being aborted after 0\.1 s"):
        background_abort.await_abort(0.1)
    release.set()


def test_an_error_of_the_abort_is_printed_and_the_wait_ends(capsys: pytest.CaptureFixture) -> None:
    def fail() -> None:
        raise RuntimeError("NCCL error: remote process exited")

    background_abort.abort_in_background(fail)
    background_abort.await_abort(5.0)
    assert "raised RuntimeError('NCCL error: remote process exited')" in capsys.readouterr().out


def test_an_abort_that_does_not_block_the_next_group_is_not_waited_for_and_its_error_comes_later(
    capsys: pytest.CaptureFixture,
) -> None:
    release = threading.Event()

    def fail_when_released() -> None:
        release.wait(5.0)
        raise RuntimeError("NCCL error: ncclCommAbort failed")

    background_abort.abort_in_background(fail_when_released, blocks_next_group=False)
    assert background_abort.await_abort(5.0) == 0.0 and background_abort.running()
    assert "raised" not in capsys.readouterr().out
    release.set()
    while background_abort.running():
        time.sleep(0.01)
    assert background_abort.await_abort(5.0) < 0.1 and not background_abort.running()
    assert "raised RuntimeError('NCCL error: ncclCommAbort failed')" in capsys.readouterr().out


def test_a_process_that_ends_lets_a_running_abort_finish_first(tmp_path) -> None:
    import subprocess
    import sys

    from tests.helpers.training_runs import REPO_ROOT

    marker = tmp_path / "aborted"
    script = (
        "import pathlib, time\n"
        "from training.parallel import background_abort\n"
        f"background_abort.abort_in_background(lambda: (time.sleep(0.5), pathlib.Path({str(marker)!r}).touch()),"
        " blocks_next_group=False)\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert marker.exists()
