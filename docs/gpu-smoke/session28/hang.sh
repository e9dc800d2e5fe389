#!/usr/bin/env bash
# Session 28 (1 x H200, the only kind lent; NVRx 0.7.0): session 27's wait for a restart NVRx already fired
# (training/resilience/inprocess.py: restart_pending reads the progress watchdog's pause_requested) on the release the
# image runs: hangs and exceptions recovered in-process, on CUDA and on the host's CPUs (a hung rank's peer blocked in
# a gloo collective, session 27's case), and the unit tests of that wait under NVRx 0.7.0 where pytest is installed.
# Run in session 28 (96.5 s; outputs beside it, docs/gpu-smoke.md).
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, NVLink multicast off
run() {  # name, then training.local's arguments
  local name=$1; shift
  timeout -k 5 200 python3 -m training.local --run-dir /tmp/h-$name --fresh "$@" > $OUT/$name.stdout.txt 2>&1
  echo "$name rc=$? $(grep -E '^== (OK|FAILED)' $OUT/$name.stdout.txt | cut -c1-260)"
  python3 -m training.telemetry.report /tmp/h-$name > $OUT/$name.report.txt 2>&1
  grep -A6 "^Faults" $OUT/$name.report.txt | cut -c1-150
  grep -c "Exception ignored on calling ctypes\|a restart was fired" /tmp/h-$name/launcher.log
}
run gpu-hang --nproc 1 --steps 70 --faults "exception@20:0,hang@35:0,sigkill@50:0"
CUDA_VISIBLE_DEVICES= run cpu-hang --nproc 2 --steps 40 --faults "hang@12:1,exception@20:0,hang@28:0"
if python3 -c "import pytest" 2>/dev/null; then
  CUDA_VISIBLE_DEVICES= timeout 120 python3 -m pytest -q -p no:cacheprovider tests/unit/training/resilience/test_inprocess.py 2>&1 | tail -3
else
  echo "no pytest on this host: the unit tests of the wait not run here"
fi
