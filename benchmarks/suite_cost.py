"""Where the test suite's CPU goes: the machine's busy CPU-seconds and the wall time of every test file.

``python -m benchmarks.suite_cost [--out runs/suite-cost.json] [--top 15] [PYTEST_ARGS...]``

Runs pytest serially (``-n 0``) with this module as a plugin, which reads the machine's busy time from
``/proc/stat`` (user, nice, system, irq, softirq: every process, the kernel's work for them included, where
``getrusage`` misses what the tests' own process trees reap in other PID namespaces) before and after each test, and
prints one row per file, the most expensive first. A module fixture's cost lands in its file's first test, so the
file is the unit. Serial and on a quiet machine, a test's busy time is its own; on two cores a test that uses both
shows more CPU-seconds than wall seconds. ``make test`` runs on three xdist workers (``TEST_WORKERS``), the last
for the files that mostly wait (tests/helpers/xdist_scopes.py): its wall time is about the CPU-seconds over
two plus the time all workers wait (measured 2026-12-04 and 2026-12-05).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from benchmarks.common import REPO
from training.common.arguments import exit_if_bad, number

#: Where the plugin writes its rows (one ``[nodeid, wall_s, busy_cpu_s]`` per test), when pytest loads it.
OUT_ENV = "SUITE_COST_OUT"


def busy_cpu_s(stat: str | None = None) -> float:
    """The machine's busy CPU-seconds since boot from the ``cpu`` line of ``/proc/stat`` (or ``stat``'s text)."""
    text = Path("/proc/stat").read_text() if stat is None else stat
    fields = next(line for line in text.splitlines() if line.startswith("cpu ")).split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class FileCost:
    """One test file's tests: their busy CPU-seconds and wall seconds in all."""

    path: str
    cpu_s: float
    wall_s: float
    tests: int


def by_file(rows: Iterable[tuple[str, float, float]]) -> list[FileCost]:
    """``(nodeid, wall_s, cpu_s)`` rows summed per file, the most CPU first (ties: by path)."""
    sums: dict[str, list[float]] = {}
    for nodeid, wall_s, cpu_s in rows:
        acc = sums.setdefault(nodeid.split("::", 1)[0], [0.0, 0.0, 0.0])
        acc[0] += cpu_s
        acc[1] += wall_s
        acc[2] += 1
    costs = [FileCost(path, cpu, wall, int(n)) for path, (cpu, wall, n) in sums.items()]
    return sorted(costs, key=lambda c: (-c.cpu_s, c.path))


def table(costs: list[FileCost], top: int) -> str:
    """The ``top`` files, one line for the rest, and the totals."""
    lines = ["| test file | tests | busy CPU-s | wall s |", "|---|---|---|---|"]
    lines += [f"| {c.path} | {c.tests} | {c.cpu_s:.1f} | {c.wall_s:.1f} |" for c in costs[:top]]
    rest = costs[top:]
    if rest:
        cpu, wall, n = sum(c.cpu_s for c in rest), sum(c.wall_s for c in rest), sum(c.tests for c in rest)
        lines.append(f"| the other {len(rest)} files | {n} | {cpu:.1f} | {wall:.1f} |")
    total = sum(c.cpu_s for c in costs), sum(c.wall_s for c in costs), sum(c.tests for c in costs)
    lines.append(f"| all {len(costs)} files | {total[2]} | {total[0]:.1f} | {total[1]:.1f} |")
    return "\n".join(lines)


# ---- the pytest plugin (``-p benchmarks.suite_cost``) ---------------------------------------------------------------

_ROWS: list[tuple[str, float, float]] = []


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Any:
    start, busy = time.monotonic(), busy_cpu_s()
    yield
    _ROWS.append((item.nodeid, time.monotonic() - start, busy_cpu_s() - busy))


def pytest_sessionfinish(session: pytest.Session) -> None:
    out = os.environ.get(OUT_ENV)
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(_ROWS))


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.suite_cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=REPO / "runs" / "suite-cost.json", help="the per-test rows (JSON)")
    p.add_argument("--top", type=number(int, at_least=0), default=15, help="files shown one by one")
    args, pytest_args = p.parse_known_args(argv)
    exit_if_bad(p, args)
    cmd = [sys.executable, "-m", "pytest", "-n", "0", "-p", "benchmarks.suite_cost", "-q", *pytest_args]
    print("==", " ".join(cmd[1:]), "(serial: each test's busy time is its own on a quiet machine) ==", flush=True)
    args.out.unlink(missing_ok=True)
    start, busy = time.monotonic(), busy_cpu_s()
    code = subprocess.call(cmd, cwd=REPO, env={**os.environ, OUT_ENV: str(args.out)})
    wall, cpu = time.monotonic() - start, busy_cpu_s() - busy
    rows = json.loads(args.out.read_text()) if args.out.exists() else []
    if not rows:
        print(f"== FAILED: pytest (exit {code}) ran no test: no rows in {args.out} ==", file=sys.stderr)
        return code or 1
    costs = by_file(rows)
    print(table(costs, args.top))
    print(f"== pytest exit {code}; the whole run {wall:.1f} s wall, {cpu:.1f} busy CPU-s; rows in {args.out} ==")
    return code


if __name__ == "__main__":
    sys.exit(main())
