"""Model room: the Llama-style decoder and Hugging Face weight loading.

Owns the network definition, its FLOP count and the mapping of HF safetensors onto it.
May import: ``training.common``, ``training.data`` (the tokenizer file names), ``platform_config``.
"""
