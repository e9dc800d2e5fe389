#!/usr/bin/env bash
# GPU call 3 (session 9, 1 x H200 host, CPU workers): issue 13's done-when run on the local 2-pod x 2-worker cluster
# with NVRx 0.7.0, the version the image ships (the CPU machines run 0.4.1). The GPU image has no cdk8s (jsii needs
# Node), so the manifests were synthesized on the CPU machine for NVRx 0.7.0 and carried in .gpu/:
#   python -m training.local --run-dir /tmp/c22-NAME --fresh --nodes 2 --nproc 2 --steps 140 --node-replace-s 5 \
#     --faults FAULTS --nvrx-version 0.7.0 --synth-only      (then copied to .gpu/c22-NAME)
# The runner refuses them unless this host's config is the one they were synthesized from.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
export CUDA_VISIBLE_DEVICES=  # CPU workers (gloo), as on the CPU machines
start=$(date +%s); t() { echo "== $1 at $(( $(date +%s) - start )) s"; }
# The GPU image has no iproute2: .gpu/bin/ip runs the CPU machine's ip (Debian 12) with its libraries.
export PATH=$PWD/.gpu/bin:$PATH
nproc; ip -V; for c in unshare nsenter mount chroot; do command -v $c; done
unshare -n -- ip link show lo || { echo "no network namespaces here"; exit 3; }
python3 -c "from training.common.gpus import cuda_device_count; print('probe', cuda_device_count())"
for run in faulted:node-loss@40:1,exception@70:2,node-loss@100:0 clean: faulted2:node-loss@40:1,exception@70:2,node-loss@100:0; do
  name=${run%%:*}; faults=${run#*:}; synth=${name%2}
  timeout -k 5 130 python3 -m training.local --run-dir /tmp/c22-$synth --fresh --nodes 2 --nproc 2 --steps 140 \
    --node-replace-s 5 --faults "$faults" --manifests .gpu/c22-$synth > /tmp/c22-$name.txt 2>&1; echo "$name rc=$?"
  grep -E "^== |Job " /tmp/c22-$name.txt | cut -c1-300 | tail -4; cp /tmp/c22-$name.txt /tmp/c22-$synth/stdout.txt
  python3 -m training.telemetry.report /tmp/c22-$synth > $OUT/c22-$name.report.txt 2>&1
  grep -A8 "^Faults" $OUT/c22-$name.report.txt; grep "^Restarts" $OUT/c22-$name.report.txt
  tar czf $OUT/c22-$name.tgz -C /tmp --exclude='*.distcp' --exclude=data --exclude=checkpoints c22-$synth 2>/dev/null
  t $name
done
