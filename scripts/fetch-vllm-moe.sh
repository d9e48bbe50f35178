#!/usr/bin/env bash
# Purpose: extract the vLLM Triton MoE baseline's 12 wheel files, so the device machine needs no registry.
#
# Extract, on this machine (pip reaches a registry here, not on the H200), the few files of the
# vllm 0.20.0 wheel that the moe_vllm_triton baseline imports at run time, into DEST (default
# .whl/vllm-extract, the folder ../shared/tools/device-wheels fills with DeepGEMM and FlashMLA),
# and print the size they add.  The file list is WHEEL_FILES in
# src/kernelwright/baselines/moe_vllm_triton/wheel_files.py.
#
#   scripts/fetch-vllm-moe.sh [DEST]                    downloads the wheel (~245 MB) to a temp dir
#   VLLM_WHEEL=/path/vllm-0.20.0-*.whl scripts/fetch-vllm-moe.sh [DEST]     uses a wheel already here
#
# vllm/__init__.py in DEST stays an empty file (created if absent, never taken from the wheel), so
# importing vllm runs nothing of vLLM's; the baseline builds the rest of the package tree itself.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
dest=${1:-.whl/vllm-extract}
mapfile -t files < <(python3 "$here/src/kernelwright/baselines/moe_vllm_triton/wheel_files.py")
version=$(python3 -c "import runpy; print(runpy.run_path('$here/src/kernelwright/baselines/moe_vllm_triton/wheel_files.py')['VLLM_VERSION'])")
wheel=${VLLM_WHEEL:-}
tmp=""
if [ -z "$wheel" ]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 \
    --platform manylinux_2_31_x86_64 --platform manylinux_2_34_x86_64 --platform manylinux_2_35_x86_64 \
    -d "$tmp" "vllm==$version" 2>&1 | grep -v '^WARNING' || true
  wheel=$(ls "$tmp"/vllm-"$version"-*.whl)
fi
mkdir -p "$dest"
# zipfile, not unzip: unzip reads the brackets of the config's name as a wildcard class
python3 - "$wheel" "$dest" "${files[@]}" <<'PY'
import sys, zipfile
wheel, dest, names = sys.argv[1], sys.argv[2], sys.argv[3:]
with zipfile.ZipFile(wheel) as z:
    for name in names:
        z.extract(name, dest)
PY
[ -f "$dest/vllm/__init__.py" ] || : > "$dest/vllm/__init__.py"
bytes=$(cd "$dest" && cat "${files[@]}" | wc -c)
echo "extracted ${#files[@]} files of vllm $version into $dest: $bytes bytes ($(python3 -c "print(f'{$bytes/2**20:.2f}')") MiB)"
