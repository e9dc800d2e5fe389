"""Two FSDP2 ranks start from Hugging Face Llama weights, and a later run resumes from its own checkpoint."""

from __future__ import annotations

from pathlib import Path

import torch

from tests.helpers.hf_llama import save_tiny_llama
from tests.helpers.training_runs import FAST_CONFIG, read_result, run_trainer
from training.model.hf_checkpoint import hf_state_dict, read_hf_config


def test_fsdp_ranks_start_from_hf_weights_then_resume_from_their_checkpoint(tmp_path: Path) -> None:
    hf = tmp_path / "llama"
    save_tiny_llama(hf)
    config = {**FAST_CONFIG, "model": {"hf_checkpoint": str(hf)}}
    run = tmp_path / "run"
    proc, _ = run_trainer(run, steps=0, config=config, extra_args=["--no-train", "--dump-model", run / "m.pt"])
    assert "fresh start from the Hugging Face weights" in proc.stdout
    assert "WARNING: the data was tokenized with bytes tokenizer, not a Hugging Face one" in proc.stdout
    loaded = torch.load(run / "m.pt")
    want = hf_state_dict(hf, read_hf_config(hf))
    assert loaded.keys() == want.keys()
    for k, v in want.items():
        assert torch.equal(loaded[k], v), k

    run_trainer(run, steps=5, config=config)  # trains from the HF weights and commits step 5
    proc, _ = run_trainer(run, steps=7, config=config)
    assert read_result(run)["restored_from"] == 5
    assert "Hugging Face weights" not in proc.stdout  # the run's own checkpoint wins over the HF weights
