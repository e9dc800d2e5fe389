#!/usr/bin/env bash
# GPU call 1 of session 21 (1 x H200, the only kind lent; NVRx 0.7.0, CPU workers): does ft_launcher's rendezvous on
# the production NVRx wait for a lost node's keep-alive to expire before it forms the next round with a replacement?
# NVRx 0.4.1 does (14.5 s after the loss whether the replacement came after 1 s or 5 s, on the CPU machine).
#   python -m benchmarks.rendezvous_rejoin --replace-after-s 1,5,10 --out /tmp/rejoin
source docs/gpu-smoke/session21/env.sh || exit  # the wheels, `ip`, NVLink multicast off
export CUDA_VISIBLE_DEVICES=  # CPU workers (gloo), as on the CPU machines
python3 -c "import torch, importlib.metadata as m; print('torch', torch.__version__, 'nvrx', m.version('nvidia-resiliency-ext'))" \
  | tee $OUT/versions.txt
timeout -k 5 400 python3 -m benchmarks.rendezvous_rejoin --replace-after-s 1,5,10 --out /tmp/rejoin 2>&1 | tee $OUT/rejoin.txt
echo "rejoin rc=${PIPESTATUS[0]}"
for f in /tmp/rejoin/*/agent-*.log; do
  d=$(basename $(dirname $f)); cp $f $OUT/$d-$(basename $f)
done
