"""Resilience room: the NVRx in-process wrapper, ft_launcher's rank monitor, fault injection and exit codes.

Owns how a failure is classified, escalated and turned into an exit code, and the timeouts' consistency checks.
May import: ``training.common``, ``training.model``, ``training.parallel``, ``training.telemetry``, ``platform_config``.
"""
