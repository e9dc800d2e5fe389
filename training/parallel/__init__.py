"""Parallel room: process groups (gloo on CPU, NCCL on CUDA), FSDP2 sharding and determinism settings.

Owns how ranks talk to each other and how the model is sharded; wraps torch's private abort once.
May import: ``platform_config``.
"""
