"""Stand-in for ``training.train`` in launcher tests: records what the launcher gave it, then exits as told.

``PAYLOAD_FAIL_RANK`` / ``PAYLOAD_EXIT_CODE`` pick the rank that fails and its exit code.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--mode", required=True)
    parser.add_argument("--faults", default="")
    args = parser.parse_args()
    rank = int(os.environ["RANK"])
    keys = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "GROUP_RANK", "MASTER_ADDR", "MASTER_PORT")
    record = {k: os.environ.get(k) for k in keys} | {"mode": args.mode, "faults": args.faults}
    out = Path(args.run_dir)
    out.mkdir(parents=True, exist_ok=True)
    with (out / f"rank-{rank}.jsonl").open("a") as f:
        f.write(json.dumps(record) + "\n")
    if str(rank) == os.environ.get("PAYLOAD_FAIL_RANK"):
        return int(os.environ.get("PAYLOAD_EXIT_CODE", "1"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
