#!/usr/bin/env bash
# Purpose: build here what the H200 device machine's image lacks, in folders that `run` carries.
#
# Everything lands in git-ignored folders that travel with `run`'s carry (64 MiB in all, the tracked
# tree included); pip works on this machine, not on the device machine:
#   .whl/    pydantic & co, flashinfer-python, apache-tvm-ffi (the shared device-wheels tool),
#            cupti-python 13.0 (the gate's CUPTI tracing of held calls: provenance, PHASE_MISMATCH, the device
#            clock's copy check), and vllm-extract.tar.xz (DeepGEMM + FlashMLA from the vllm
#            0.20.0 wheel, 30 MB as files, 2.3 MB packed: scripts/h200.sh unpacks it)
#   .carry/flashinfer-cache/   FlashInfer's sm_90a modules, prebuilt without a GPU (about 25 min on
#            2 cores; only with --flashinfer): python -m kernelwright.baselines.prebuild
# Usage: bash scripts/device-carry.sh [--flashinfer]      then: run(..., carry=[".whl", ".carry"])
set -euo pipefail
cd "$(dirname "$0")/.."
grep -qx "/.whl/" .git/info/exclude 2>/dev/null || echo "/.whl/" >> .git/info/exclude
bash ../shared/tools/device-wheels --baselines .whl
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux2014_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux_2_28_x86_64 \
  -d .whl "cupti-python>=13.0,<13.1" 2>&1 | grep -v WARNING || true
bash scripts/fetch-vllm-moe.sh .whl/vllm-extract     # the vLLM Triton MoE baseline's files
if [ -d .whl/vllm-extract ]; then
  tar cJf .whl/vllm-extract.tar.xz -C .whl vllm-extract && rm -rf .whl/vllm-extract
fi
if [ "${1:-}" = "--flashinfer" ]; then
  site=$(mktemp -d)
  python3 -m pip download -q --no-deps -d "$site/dl" flashinfer-python==0.6.13 "apache-tvm-ffi==0.1.15.post2" \
    nvidia-curand nvidia-cublas 2>&1 | grep -v WARNING || true
  python3 -m pip install -q --no-deps --target "$site/site" "$site"/dl/*.whl
  python3 -m pip install -q --target "$site/site" requests tqdm nvidia-ml-py packaging ninja einops click tabulate filelock
  PATH="$site/site/bin:$PATH" FLASHINFER_CUDA_ARCH_LIST=9.0a PYTHONPATH="$site/site:$PWD/src" \
    python3 -m kernelwright.baselines.prebuild --out .carry/flashinfer-cache --modules dsv3_routing,mla_fa3,topk \
    --jobs "$(nproc)" --include "$site/site/nvidia/cu13/include"
fi
du -sh .whl .carry 2>/dev/null || true
