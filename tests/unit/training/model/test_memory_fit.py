"""Whether a model size's training state fits each rank's memory (``training.model.memory_fit``)."""

from __future__ import annotations

import pytest

from training.model.memory_fit import fit_problem, state_bytes_per_rank

H100 = 85_029_158_912  # torch.cuda.get_device_properties(0).total_memory of an H100 80GB HBM3 (79.2 GiB)
H200 = 150_754_820_096  # an H200 (140.4 GiB)


def test_the_8b_model_on_one_h100_is_refused_and_told_the_smallest_world() -> None:
    # 8,030,261,248 parameters x 16 bytes = 128.5 GB; 90% of the H100 is 76.5 GB: 2 ranks
    assert state_bytes_per_rank("llama3-8b", 1) == 128_484_179_968
    assert fit_problem("llama3-8b", 1, H100, "cuda:0 (NVIDIA H100 80GB HBM3)") == (
        "model.size llama3-8b: 8.03 billion parameters need 128.5 GB of training state per rank at WORLD_SIZE 1 "
        "(fp32 weights, gradients and AdamW's two moments: 16 bytes a parameter, sharded by FSDP), more than 90% of "
        "cuda:0 (NVIDIA H100 80GB HBM3) (79.2 GiB): it needs at least 2 ranks of that memory (--nproc, --nodes), or "
        "a smaller model.size"
    )


@pytest.mark.parametrize(
    ("size", "world", "device_bytes"),
    [
        ("llama3-8b", 2, H100),  # 64.2 GB of 76.5
        ("llama3-8b", 64, H100),  # prod: 8 x p5.48xlarge
        ("llama3-8b", 1, H200),  # 128.5 GB of 135.7
        ("1b", 1, H100),  # 974,227,456 x 16 = 15.6 GB
    ],
)
def test_worlds_whose_share_fits_pass(size: str, world: int, device_bytes: int) -> None:
    assert fit_problem(size, world, device_bytes, "the GPU") is None


def test_the_1b_model_on_a_small_host_is_refused() -> None:
    problem = fit_problem("1b", 1, 8 << 30, "host memory per local rank")
    assert problem is not None and "15.6 GB of training state per rank at WORLD_SIZE 1" in problem
    assert problem.endswith("it needs at least 3 ranks of that memory (--nproc, --nodes), or a smaller model.size")
