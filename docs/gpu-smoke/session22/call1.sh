#!/usr/bin/env bash
# Session 22, call 1 (1 x H200, only the host's CPUs used; `bash docs/gpu-smoke/session22/call1.sh`): NVRx 0.7.0's
# ft_launcher after a lost node when the survivor's worker does not fail at once, as an NCCL worker held in its
# collective does not (`python -m benchmarks.rendezvous_rejoin --hold-s`). Does a replacement agent joining restart
# the survivor's worker that still looks healthy? On the CPU machine NVRx 0.4.1 does (the next round 15.0 s after the
# loss with a 30 s hold). GPU session 21's ft-launcher Job on NCCL waited 44 s for its rank monitor.
source docs/gpu-smoke/session21/env.sh || exit  # the wheels (psutil added for the benchmark), `ip`, NVLink multicast off
python3 -c "import importlib.metadata as m; print('nvrx', m.version('nvidia-resiliency-ext'), 'psutil', m.version('psutil'))"
python3 -m benchmarks.rendezvous_rejoin --replace-after-s 5 --hold-s 30 --out /tmp/rj-hold30 2>&1 | tail -5 | tee $OUT/hold30.txt
python3 -m benchmarks.rendezvous_rejoin --replace-after-s 5 --out /tmp/rj-hold0 --port 29660 2>&1 | tail -5 | tee $OUT/hold0.txt
for d in rj-hold30 rj-hold0; do tar czf $OUT/$d.tgz -C /tmp $d 2>/dev/null; done
grep -h "restart\|Restart\|round\|waiting" /tmp/rj-hold30/delay-5/agent-node0.log | cut -c1-220 | tail -40 > $OUT/hold30-survivor-agent.txt
