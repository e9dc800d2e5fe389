"""Data room: tokenized shards, the resumable sampler, and corpus preparation (``python -m training.data.prepare``).

Owns the on-disk token format (``index.json`` + shards) and the order in which samples are drawn.
May import: ``training.common``, ``platform_config``.
"""
