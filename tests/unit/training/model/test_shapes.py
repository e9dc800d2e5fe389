"""Model shapes without torch: the parameter count agrees with the real model, and Llama 3.1 8B's known size."""

from __future__ import annotations

import pytest

from training.model.llama import build_model
from training.model.shapes import MODEL_SIZES, checkpoint_bytes, param_count, param_shapes


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_param_count_is_the_built_models(size):
    model = build_model(size, 264)
    assert param_count(MODEL_SIZES[size], 264) == sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("size", ["tiny", "small"])
def test_param_shapes_are_the_built_models(size):
    model = build_model(size, 264)
    assert sorted(param_shapes(MODEL_SIZES[size], 264)) == sorted(tuple(p.shape) for p in model.parameters())


def test_llama3_8b_has_its_published_parameter_count_and_a_96_gb_checkpoint():
    # Meta's Llama 3.1 8B: 8,030,261,248 parameters (untied embeddings, vocabulary 128,256)
    assert param_count(MODEL_SIZES["llama3-8b"], 128256) == 8_030_261_248
    assert checkpoint_bytes("llama3-8b") == 12 * 8_030_261_248  # fp32 weights + two fp32 AdamW moments
    assert checkpoint_bytes("1b") == 12 * 974_227_456  # the 11.7 GB the GPU benchmarks wrote
