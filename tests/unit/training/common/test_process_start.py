"""training.common.process_start: a process's start on the wall clock, between what its parent saw around the fork."""

from __future__ import annotations

import os
import struct
import time

from training.common.process_start import process_start_ts

#: One clock tick of the kernel's process start (USER_HZ), the resolution of /proc/<pid>/stat's starttime.
TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def test_a_forked_child_started_between_the_times_its_parent_saw_around_the_fork() -> None:
    """psutil's create_time fails this on a machine whose boot time has a fraction of a second (it was 0.73 s early
    on the test machine): /proc/stat gives the boot time in whole seconds."""
    read, write = os.pipe()
    before = time.time()
    pid = os.fork()
    if pid == 0:  # the child: its own start, as the worker's ``imports`` phase reads it
        os.write(write, struct.pack("d", process_start_ts() or 0.0))
        os._exit(0)
    after_fork = time.time()
    os.close(write)
    (child_start,) = struct.unpack("d", os.read(read, 8))
    os.close(read)
    os.waitpid(pid, 0)
    assert before - 2 * TICK_S <= child_start <= after_fork + 2 * TICK_S, (before, child_start, after_fork)


def test_a_parent_started_before_its_child_and_a_missing_process_has_no_start() -> None:
    parent, mine = process_start_ts(os.getppid()), process_start_ts()
    assert parent is not None and mine is not None and parent <= mine + TICK_S  # both may start in one tick
    assert process_start_ts(2**22 + 12345) is None  # beyond the default pid_max (2**22): no such process
