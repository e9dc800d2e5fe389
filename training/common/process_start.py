"""When this process started, on the wall clock, to the kernel's clock tick.

psutil's ``create_time`` adds a process's start (clock ticks since boot) to the boot time that ``/proc/stat`` gives in
whole seconds, so it is up to a second early (0.73 s on the test machine): a worker forked from its template, whose
imports take ~0.05 s, reported 0.8 s of ``imports`` and its launcher as much too little. Here the process's age
(``CLOCK_BOOTTIME`` now minus its start, both since boot) is taken from the wall clock instead.
"""

from __future__ import annotations

import os
import time


def process_start_ts(pid: int | str = "self") -> float | None:
    """The start of process ``pid`` (default: this one) as a ``time.time()`` value; None without Linux's ``/proc``."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: the fields after it start past the last ')'
    start_ticks = int(stat.rsplit(")", 1)[1].split()[19])  # field 22, starttime
    age_s = time.clock_gettime(time.CLOCK_BOOTTIME) - start_ticks / os.sysconf("SC_CLK_TCK")
    return time.time() - age_s
