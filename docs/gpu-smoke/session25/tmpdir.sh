#!/usr/bin/env bash
# Session 25 (1 x H200, the only kind lent; NVRx 0.7.0): a local launch's own TMPDIR (c124f13) on the release the image
# runs. A launcher forked from the worker template must find its TMPDIR again (NVRx 0.7.0 names ft_launcher's IPC
# socket at import, its rank-monitor sockets at run time, from tempfile.gettempdir()), the runs must reach their target
# steps, and nothing of theirs may stay in the machine's /tmp.
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, `ip`, NVLink multicast off
python3 -c "import nvidia_resiliency_ext, torch; print('nvrx', nvidia_resiliency_ext.__file__, 'torch', torch.__version__, torch.cuda.device_count(), 'GPU')"
ls /tmp > /tmp/before.txt
run() {  # name, then training.local's arguments
  local name=$1; shift
  timeout -k 5 240 python3 -m training.local --run-dir /tmp/r-$name --fresh "$@" > $OUT/$name.stdout.txt 2>&1
  echo "$name rc=$? $(grep -E '^== (OK|FAILED)' $OUT/$name.stdout.txt | cut -c1-260)"
  grep -E "log_dir +:" /tmp/r-$name/launcher.log | head -2
  python3 -m training.telemetry.report /tmp/r-$name > $OUT/$name.report.txt 2>&1
  grep -A4 "^Faults" $OUT/$name.report.txt | cut -c1-150
}
# CUDA, 1 GPU: ft_launcher + in-process wrapper, an exception (in-process) and a SIGKILL (ft_launcher)
run gpu-inprocess-ft --nproc 1 --steps 60 --faults "exception@20:0,sigkill@40:0"
# the host's CPUs, 2 gloo workers, NVRx 0.7.0: the same two layers, then k8s-only's pod restarts (torchrun)
CUDA_VISIBLE_DEVICES= run cpu-inprocess-ft --nproc 2 --steps 40 --faults "exception@10:1,sigkill@25:0"
CUDA_VISIBLE_DEVICES= run cpu-k8s-only --nproc 2 --mode k8s-only --steps 40 --faults "exception@10:1,sigkill@25:0"
ls /tmp > /tmp/after.txt
echo "left in /tmp by the runs (expected: only the run directories r-*):"
diff /tmp/before.txt /tmp/after.txt | grep '^>'
