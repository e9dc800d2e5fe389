# Sourced from the repository root on a GPU host: NVRx 0.7.0 and the wheels it needs from .whl/ into /tmp/site (the
# host reaches no package index: download them first with the command in docs/gpu-smoke.md), the repository on
# PYTHONPATH, and NVLink multicast off.
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || return 1
export PYTHONPATH=/tmp/site:$PWD PATH=/tmp/site/bin:$PATH
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONWARNINGS=ignore
