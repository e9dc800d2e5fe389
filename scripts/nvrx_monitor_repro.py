"""Minimal reproduction: NVRx's in-process monitor process skips its soft/hard timeout checks after every progress
message, so with the default intervals a hang is caught long after ``soft_timeout``, if at all.

Standalone (needs only ``torch`` and ``nvidia-resiliency-ext``, CPU is enough; no GPU, no launcher)::

    python scripts/nvrx_monitor_repro.py [--soft 2] [--cap 20] [--repeats 1]

Each scenario runs in a fresh process as a world of one rank inside ``inprocess.Wrapper``. The wrapped function hangs
in its first iteration; an ``Abort`` records when NVRx acted on the hang (its monitor thread calls the abort as soon
as the monitor process has recorded the soft timeout). A hang that nothing catches ends by itself after ``--cap`` s.

Scenarios (``soft_timeout`` = ``--soft``, ``hard_timeout`` far above ``--cap``):

- ``blocked-in-C, intervals 1 s/1 s``: the main thread blocks in C (``time.sleep``), as in a stuck collective. The
  automatic progress timestamp stops. NVRx's defaults: monitor process and progress watchdog both 1 s.
- ``blocked-in-C, intervals 0.1 s/1 s``: the same with ``monitor_process_interval`` 0.1 s.
- ``Python spin, no ping``: the main thread loops in Python (``time.sleep(0.05)`` in a loop). The automatic timestamp
  keeps advancing (the watchdog's pending call runs between bytecodes), so only a manual ``ping`` can show the hang.
- ``Python spin, after ping()``: the same after one ``CallWrapper.ping()``: the manual timestamp times out.

The printed delay is hang start -> abort. See docs/nvrx-monitor.md for the source lines and measured results.
"""

# No ``from __future__ import annotations``: NVRx finds the CallWrapper parameter by its annotation object.
import argparse
import datetime
import json
import math
import os
import socket
import subprocess
import sys
import time
from typing import Any

SCENARIOS = {
    "blocked-in-C, intervals 1 s/1 s": {"hang": "c", "monitor": 1.0, "watchdog": 1.0, "ping": False},
    "blocked-in-C, intervals 0.1 s/1 s": {"hang": "c", "monitor": 0.1, "watchdog": 1.0, "ping": False},
    "Python spin, no ping, 0.1 s/1 s": {"hang": "py", "monitor": 0.1, "watchdog": 1.0, "ping": False},
    "Python spin, after ping(), 0.1 s/1 s": {"hang": "py", "monitor": 0.1, "watchdog": 1.0, "ping": True},
}


def child(spec: dict, soft: float, cap: float) -> None:
    """One scenario: prints one JSON line {"detected_s": float | None}."""
    from nvidia_resiliency_ext import inprocess
    from nvidia_resiliency_ext.inprocess.abort import Abort

    seen: dict[str, float] = {}

    class RecordAbort(Abort):
        def __call__(self, state):  # type: ignore[no-untyped-def]
            seen.setdefault("abort", time.monotonic())
            return state

    def td(s: float) -> datetime.timedelta:
        return datetime.timedelta(seconds=s)

    def fn(call_wrapper: inprocess.CallWrapper = None) -> None:  # type: ignore[assignment]
        if call_wrapper.iteration > 0:
            return
        if spec["ping"]:
            call_wrapper.ping()
        seen["hang"] = time.monotonic()
        if spec["hang"] == "c":
            time.sleep(cap)  # one C call: no bytecode runs, so the automatic timestamp stops
        else:
            while time.monotonic() - seen["hang"] < cap:  # bytecode runs between the sleeps
                time.sleep(0.05)
        seen["end"] = time.monotonic()

    wrapper = inprocess.Wrapper(
        store_kwargs={"port": int(os.environ["REPRO_STORE_PORT"])},
        abort=RecordAbort(),
        monitor_process_interval=td(spec["monitor"]),
        progress_watchdog_interval=td(spec["watchdog"]),
        monitor_thread_interval=td(spec["monitor"]),
        last_call_wait=td(0.1),  # (default 1 s): the wait between the record and the abort, not the detection
        soft_timeout=td(soft),
        hard_timeout=td(cap + 60),
        heartbeat_timeout=td(cap + 30),
        barrier_timeout=td(cap + 120),
        completion_timeout=td(cap + 120),
    )
    wrapper(fn)()
    abort = seen.get("abort")
    print(json.dumps({"detected_s": None if abort is None else round(abort - seen["hang"], 2)}), flush=True)
    os._exit(0)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def positive(kind: type[int] | type[float]) -> Any:
    """An argparse ``type``: a ``kind`` above 0 (argparse's own error otherwise: this script stays standalone)."""

    def convert(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not (value > 0 and math.isfinite(value)):
            raise argparse.ArgumentTypeError(f"expected a number > 0 (got {text!r})")
        return value

    return convert


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--soft", type=positive(float), default=2.0, help="soft_timeout in seconds")
    p.add_argument("--cap", type=positive(float), default=20.0, help="a hang ends by itself after this many seconds")
    p.add_argument("--repeats", type=positive(int), default=1)
    p.add_argument("--child", choices=list(SCENARIOS), default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.cap <= args.soft:
        p.error(f"--cap {args.cap:g}: must be more seconds than --soft {args.soft:g} (the hang must outlast it)")
    if args.child:
        child(SCENARIOS[args.child], args.soft, args.cap)
        return 0
    import nvidia_resiliency_ext

    version = getattr(nvidia_resiliency_ext, "__version__", None)
    if version is None:
        from importlib.metadata import version as dist_version

        version = dist_version("nvidia-resiliency-ext")
    print(f"NVRx {version}, soft_timeout {args.soft:g} s, a hang ends by itself after {args.cap:g} s\n")
    print("| scenario (monitor process / progress watchdog interval) | hang -> abort, s |")
    print("|---|---|")
    for name in SCENARIOS:
        results = []
        for _ in range(args.repeats):
            port = _free_port()
            env = {
                **os.environ,
                "RANK": "0",
                "WORLD_SIZE": "1",
                "MASTER_ADDR": "127.0.0.1",
                "MASTER_PORT": str(_free_port()),
                "REPRO_STORE_PORT": str(port),
            }
            env.pop("LOCAL_RANK", None)  # NVRx 0.7 adds GPU health checks when it is set
            cmd = [sys.executable, __file__, "--child", name, "--soft", str(args.soft), "--cap", str(args.cap)]
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=args.cap + 120)
            lines = [line for line in out.stdout.splitlines() if line.startswith("{")]
            if out.returncode or not lines:
                raise SystemExit(f"{name}: the scenario failed (exit {out.returncode}):\n{out.stderr[-3000:]}")
            got = json.loads(lines[-1])["detected_s"]
            results.append("not caught" if got is None else f"{got:.2f}")
        print(f"| {name} | {', '.join(results)} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
