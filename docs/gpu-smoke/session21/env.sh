# Sourced by this session's call scripts, from the repository root on the GPU host: NVRx 0.7.0 and its wheels into
# /tmp/site, iproute2's `ip` from .whl/iproute (the host has none; docs/gpu-smoke.md, Session 21), and NVLink
# multicast off.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD PATH=$PWD/.whl/iproute/bin:/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
