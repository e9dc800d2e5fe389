"""Checkpoint room: saving, committing, verifying and restoring training state (torch DCP, NVRx async path).

Owns the on-disk format (``step_N/``, ``COMMITTED``, per-rank checksums), the save backends and the restore order.
May import: ``training.common``, ``training.data``, ``training.parallel``, ``training.telemetry``, ``platform_config``.
"""
