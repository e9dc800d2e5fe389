"""The NCCL abort benchmark on a machine without CUDA (``benchmarks.nccl_abort``)."""

from __future__ import annotations

import pytest
import torch

from benchmarks.nccl_abort import main


def test_without_cuda_it_says_there_is_nothing_to_measure(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert main(["--env", "NCCL_RAS_ENABLE=0"]) == 2
    assert capsys.readouterr().out == "nccl_abort: no CUDA here; the NCCL abort is what this measures, nothing to do\n"
