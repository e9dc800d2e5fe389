"""A world of one rank in NVRx's Wrapper (built from ``cfg.local.inprocess``, step factor 1) with the trainer's step
pings: steps, a non-step phase longer than the step budget (must not fire), more steps, then a Python-level hang
(must fire the soft timeout). Prints one JSON line: what NVRx interrupted, the iterations entered, the events.

``python tests/helpers/nvrx_step_pings.py STORE_PORT RUN_DIR``
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from platform_config import load_config
from training.resilience.hang import StepPings
from training.resilience.inprocess import RestartTracker, build_wrapper, wrap
from training.telemetry.events import EventLog, read_events

STEP_S = 0.02


def main() -> None:
    port, run_dir = int(sys.argv[1]), Path(sys.argv[2])
    ip = load_config().local.inprocess.model_copy(update={"step_timeout_factor": 1.0})
    events = EventLog(run_dir, 0)
    pings = StepPings(ip, events=events)
    seen: dict[str, object] = {"iterations": [], "interrupted_in": None, "interruption": None}

    def steps(first: int, n: int) -> int:
        for step in range(first, first + n):
            time.sleep(STEP_S)
            pings.step(step)
        return first + n

    def fn(call_wrapper) -> int:  # type: ignore[no-untyped-def]
        seen["iterations"].append(call_wrapper.iteration)
        pings.bind(call_wrapper)
        if call_wrapper.iteration > 0:
            return call_wrapper.iteration
        phase = "steps"
        try:
            step = steps(1, 8)
            phase = "checkpoint"
            pings.phase()  # a checkpoint longer than the step budget, shorter than the soft timeout
            time.sleep((pings.floor_s + pings.soft_s) / 2)
            pings.resume()
            phase = "steps"
            steps(step, 8)
            phase = "hang"
            while True:  # Python keeps running: only the manual timestamp stops
                time.sleep(0.05)
        except BaseException as exc:
            seen["interrupted_in"], seen["interruption"] = phase, str(exc)
            raise

    wrapper = build_wrapper(ip, port=port, min_world_size=1, tracker=RestartTracker())
    result = wrap(wrapper, fn)()
    timeouts = [{k: e[k] for k in ("soft_s", "hard_s")} for e in read_events(run_dir) if e["event"] == "hang_timeouts"]
    print(json.dumps({**seen, "result": result, "hang_timeouts": timeouts}), flush=True)


if __name__ == "__main__":
    main()
