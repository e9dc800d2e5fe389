"""The memory tier's save-side copies (``training.checkpoint.snapshot_copy``): what a snapshot's event adds."""

from __future__ import annotations

import pytest
import torch

from training.checkpoint.snapshot_copy import allocator_retries


def test_the_allocator_s_retries_are_counted_on_cuda_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert allocator_retries() == {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda: {"num_alloc_retries": 3, "num_ooms": 0})
    assert allocator_retries() == {"cuda_alloc_retries": 3}
    monkeypatch.setattr(torch.cuda, "memory_stats", lambda: {})  # no allocation yet: torch reports no counters
    assert allocator_retries() == {"cuda_alloc_retries": 0}
