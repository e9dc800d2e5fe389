"""Telemetry room: the run's event log, goodput analysis, the report and its plots, CloudWatch EMF, step metrics.

Owns ``events.jsonl`` (the single source for every figure) and the definitions of each goodput number.
May import: ``training.common``, ``training.launch`` (its environment names), ``training.whatif``, ``platform_config``.
"""
