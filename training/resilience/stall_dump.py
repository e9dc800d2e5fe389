"""Hang diagnostics: dump every thread's Python stack when a rank stops making progress.

``TRAINING_STALL_DUMP_S=N`` (off when unset or 0): if no training step completes for N seconds, Python's
``faulthandler`` writes all thread stacks of this worker to stderr (the launcher log). It runs from a C
watchdog thread, so it works even when a thread holds the GIL in a blocked call: what a hang that no
Python-level timeout reports needs. Each completed step re-arms it; a dump is printed once per stall.
"""

from __future__ import annotations

import faulthandler
import os
import sys

ENV = "TRAINING_STALL_DUMP_S"


def threshold_s(environ: dict[str, str] | None = None) -> float:
    """The configured stall threshold in seconds (0 = off); a clear error on a bad value."""
    raw = (os.environ if environ is None else environ).get(ENV, "").strip()
    if not raw:
        return 0.0
    try:
        value = float(raw)
    except ValueError:
        raise ValueError(f"{ENV}={raw!r}: expected a number of seconds (0 = off)") from None
    if value < 0:
        raise ValueError(f"{ENV}={raw!r}: must be >= 0")
    return value


class StallDump:
    """Re-armed on progress; when ``threshold_s`` passes without progress, all stacks go to stderr."""

    def __init__(self, threshold: float) -> None:
        self.threshold = threshold

    @property
    def enabled(self) -> bool:
        return self.threshold > 0

    def progress(self) -> None:
        """Progress was made: restart the countdown."""
        if self.enabled:
            faulthandler.dump_traceback_later(self.threshold, repeat=False, file=sys.stderr, exit=False)

    def stop(self) -> None:
        if self.enabled:
            faulthandler.cancel_dump_traceback_later()
