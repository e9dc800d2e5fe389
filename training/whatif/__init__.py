"""What-if room: the goodput planner (``python -m training.whatif``), a segment-level simulation of a training job.

Owns the planner's inputs, the simulation, the interval sweep (Young / Daly), calibration and the published-table fit.
May import: ``training.common``, ``platform_config``.
"""
