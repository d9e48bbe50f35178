#!/usr/bin/env bash
# Purpose: run measurement stages on the H200 device machine (bash scripts/h200.sh STAGE...).
#
# No registry there: it installs the carried wheels, then runs the stages below in order, writing
# logs and records under $OUT (and /tmp/records, which the `pack` stage tars into $OUT).
set -uo pipefail
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
WHL=${WHL:-.whl}
# the carried wheels, and folders packed as .tar.xz beside them (vllm-extract: DeepGEMM's CUTLASS
# headers are 27 MB as files, 2 MB packed: the carry limit is 64 MiB)
VLLM_EXTRACT=$WHL/vllm-extract
if [ -d "$WHL" ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$WHL"/*.whl >/dev/null 2>&1 \
    || echo "wheel install failed"
  for packed in "$WHL"/*.tar.xz; do [ -f "$packed" ] && tar xJf "$packed" -C /tmp; done
  [ -d /tmp/vllm-extract ] && VLLM_EXTRACT=/tmp/vllm-extract
fi
# FlashInfer's prebuilt sm_90a modules (python -m kernelwright.baselines.prebuild), when carried
FICACHE=${FICACHE:-$( [ -d .carry/flashinfer-cache ] && echo $PWD/.carry/flashinfer-cache )}
if [ -n "$FICACHE" ] && [ -d "$FICACHE/deps" ] && ! python3 -c "import requests, tqdm, pynvml, packaging" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site "$FICACHE"/deps/*.whl >/dev/null 2>&1
fi
export FLASHINFER_WORKSPACE_BASE=/tmp/fi
export PYTHONPATH=/tmp/site:$VLLM_EXTRACT:${FICACHE:+$FICACHE:}$PWD/src:$PWD
export KERNELWRIGHT_CACHE=/tmp/kwcache
kw() { python3 -m kernelwright "$@"; }

# Wrap a call's stages as `timeout -k 5 LIMIT bash scripts/h200.sh STAGES...; bash scripts/h200.sh pack`
# with LIMIT under the device tool's limit, so that what was measured comes back.
for stage in "$@"; do
  echo "=== stage $stage $(date +%T)"
  case $stage in
    env)
      nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm --format=csv
      python3 -c "import torch, triton; print('torch', torch.__version__, 'triton', triton.__version__, torch.cuda.get_device_name())"
      python3 -c "from cupti import cupti; print('cupti ok')" || echo "no cupti"
      python3 -c "from cuda.bindings import runtime; print('cuda.bindings ok')" || echo "no cuda.bindings"
      python3 -c "import pydantic; print('pydantic', pydantic.VERSION)";;
    device-info) kw device-info --measure 2>&1 | tee "$OUT/device-info.txt";;
    gpu-tests) python3 -m pytest -q -m gpu -s ${GPU_TESTS:-tests/solutions} 2>&1 | tee "$OUT/gpu-tests.log" | tail -${GPU_TAIL:-60};;
    clock) # the device-time clock: hold lengths with and without another stream's kernel, then its GPU tests
      mkdir -p /tmp/records
      python3 experiments/hold_probe.py 2>&1 | tee /tmp/records/hold-probe.log | tail -12
      python3 -m pytest -q -m gpu -s tests/gate/test_device_clock.py 2>&1 | tee /tmp/records/clock-tests.log | tail -${CLOCK_TAIL:-25};;
    sideprobe) # where a private stream's kernel runs relative to the blocking kernel (experiments/side_stream_probe.py)
      mkdir -p /tmp/records
      timeout -k 10 ${SIDE_TIMEOUT:-60} python3 experiments/side_stream_probe.py --json /tmp/records/side_stream_probe.json 2>&1 | tee /tmp/records/side_stream_probe.log | tail -8;;
    selfcheck) timeout -k 10 ${SELFCHECK_TIMEOUT:-240} python3 -m kernelwright.baselines.selfcheck --out "$OUT/selfcheck" 2>&1 | tee "$OUT/selfcheck.log" | tail -${SELFCHECK_TAIL:-60};;
    smoke) kw bench -d indexer -d attention --limit 4 --out "$OUT/smoke" 2>&1 | tail -40;;
    bench) # BENCH_ARGS: e.g. "-d moe -d attention"; records under /tmp/records/<name> (pack them at the end)
      name=${BENCH_NAME:-bench}
      # into a file, not a pipe: a worker left behind by the timeout would hold a pipe open
      timeout -k 10 ${BENCH_TIMEOUT:-520} python3 -m kernelwright bench ${BENCH_ARGS:-} --out /tmp/kw-$name >/tmp/kw-$name.log 2>&1
      tail -${BENCH_TAIL:-45} /tmp/kw-$name.log
      grep -a "skipped" /tmp/kw-$name.log | tail -5   # a baseline that did not load (the tail above may cut it)
      [ -f /tmp/kw-$name/summary.json ] || python3 -m kernelwright report /tmp/kw-$name >/dev/null 2>&1  # interrupted: rebuild
      mkdir -p /tmp/records/$name && cp /tmp/kw-$name/*.json /tmp/kw-$name/traces/*.jsonl /tmp/kw-$name.log /tmp/records/$name/ 2>/dev/null
      tar czf /tmp/records/$name-logs.tgz -C /tmp/kw-$name logs 2>/dev/null;;
    redteam) # RT_CASES: space-separated case ids, or "all" (default: the CUDA-only ones and a few
             # controls); RT_CANARIES=1 adds the zeros/constant canaries; RT_NAME names the record;
             # RT_JOBS: workers at once (default 1 on CUDA: the timing cases need the GPU alone)
      mkdir -p /tmp/records
      name=${RT_NAME:-redteam-cuda}
      args=""
      if [ "${RT_CASES:-}" != "all" ]; then
        for c in ${RT_CASES:-side_stream l2_persistence reference_call_cuda honest_triton cache_pointer frame_walk patch_timer held_side_stream host_compute_held sync_in_call phase_switch}; do args="$args --case $c"; done
      fi
      if [ "${RT_CANARIES:-0}" = 1 ]; then args="$args --canaries"; else args="$args --no-canaries"; fi
      [ -n "${RT_LOGS:-}" ] && args="$args --out /tmp/records/$name-logs"
      [ -n "${RT_JOBS:-}" ] && args="$args --jobs $RT_JOBS"
      timeout -k 10 ${RT_TIMEOUT:-150} python3 -m kernelwright redteam --device cuda $args --json /tmp/records/$name.json 2>&1 | tee /tmp/records/$name.log | tail -${RT_TAIL:-25};;
    py) # any script with the stages' environment: PY_ARGS (python3's arguments), log /tmp/records/${PY_NAME:-py}.log
      mkdir -p /tmp/records
      timeout -k 10 ${PY_TIMEOUT:-120} python3 ${PY_ARGS} 2>&1 | tee /tmp/records/${PY_NAME:-py}.log | tail -${PY_TAIL:-30};;
    probe) # the gate's timed loop vs a micro-benchmark loop on the shipped MoE (PROBE_ARGS)
      mkdir -p /tmp/records
      timeout -k 10 ${PROBE_TIMEOUT:-200} python3 experiments/gate_loop_probe.py ${PROBE_ARGS:-} 2>&1 | tee /tmp/records/gate_loop_probe.log | tail -30
      cp "$OUT/gate_loop_probe.json" /tmp/records/ 2>/dev/null;;
    variants) # the MoE table sweep, python -m kernelwright.tuning.moe sweep with VAR_ARGS (e.g. "--only d8,d9 --ts 1,7,16"),
              # records under /tmp/records/${VAR_NAME:-variants}
      vdir=/tmp/records/${VAR_NAME:-variants}; mkdir -p $vdir
      timeout -k 10 ${VAR_TIMEOUT:-240} python3 -m kernelwright.tuning.moe sweep ${VAR_ARGS:-} --out $vdir 2>&1 | tee $vdir/variants.log | tail -${VAR_TAIL:-40};;
    dsa-variants) # the shipped DSA kernels' launch modes and configs, python -m kernelwright.tuning.dsa with DSA_ARGS
      ddir=/tmp/records/${DSA_NAME:-dsa-variants}; mkdir -p $ddir
      timeout -k 10 ${DSA_TIMEOUT:-240} python3 -m kernelwright.tuning.dsa ${DSA_ARGS:-} --out $ddir 2>&1 | tee $ddir/variants.log | tail -${DSA_TAIL:-40};;
    envelope) # experiments/indexer_envelope.py (ENV_ARGS): the shipped indexer's long- and short-row paths (each forced) and the recipe
      mkdir -p /tmp/records/indexer_envelope
      timeout -k 10 ${ENV_TIMEOUT:-330} python3 experiments/indexer_envelope.py ${ENV_ARGS:-} --out /tmp/records/indexer_envelope 2>&1 | tee /tmp/records/indexer_envelope/log.txt | tail -${ENV_TAIL:-70};;
    ncu) # Nsight Compute on NCU_CMD (python3's arguments, e.g. "-m kernelwright.tuning.moe once --seq-len 7") with NCU_ARGS (sections, -k, -c)
      mkdir -p /tmp/records
      timeout -k 10 ${NCU_TIMEOUT:-200} ncu ${NCU_ARGS:-} python3 ${NCU_CMD} 2>&1 | tee /tmp/records/${NCU_NAME:-ncu}.log | tail -${NCU_TAIL:-80};;
    hostprobe) # the MoE solution's host path inside the gate's worker, piece by piece
      mkdir -p /tmp/records
      python3 experiments/moe_host_probe.py /tmp/moeprobe >/dev/null
      timeout -k 10 ${HP_TIMEOUT:-150} python3 -m kernelwright bench -d moe --no-shipped -s /tmp/moeprobe -w ${HP_WORKLOADS:-0,1,2} --trials 1 --out /tmp/kw-hostprobe 2>&1 | tail -8
      grep -rh "moe-probe" /tmp/kw-hostprobe/logs | tee /tmp/records/moe_host_probe.log | tail -20;;
    overhead) # launch overhead of events-idle timing in fresh / CUPTI-attached / profiled processes
      mkdir -p /tmp/records
      timeout -k 10 ${OH_TIMEOUT:-150} python3 experiments/launch_overhead.py 2>&1 | tee /tmp/records/launch_overhead.log | tail -30
      cp "$OUT/launch_overhead.json" /tmp/records/ 2>/dev/null;;
    cluster) # multi-GPU kinds only: pool throughput with 1 and 2 GPUs and cross-GPU agreement
      mkdir -p /tmp/records
      timeout -k 10 ${CL_TIMEOUT:-120} python3 -m kernelwright.cluster.measure --gpus ${CL_GPUS:-1,2} --backend local ${CL_ARGS:--d attention --limit 8} --out /tmp/records/cluster 2>&1 | tee /tmp/records/cluster.log | tail -20;;
    gluonprobe) # block-scaled FP8 GEMM: Gluon with one wgmma in flight vs the Triton tile (experiments/gluon_blockscale_probe.py)
      mkdir -p /tmp/records
      timeout -k 10 ${GP_TIMEOUT:-240} python3 experiments/gluon_blockscale_probe.py ${GP_ARGS:-} --json /tmp/records/gluon_blockscale_probe.json 2>&1 | tee /tmp/records/gluon_blockscale_probe.log | tail -40;;
    swigluprobe) # the MoE GEMM1 tile (up/gate, SwiGLU) in Gluon with one K block in flight vs Triton (experiments/gluon_swiglu_probe.py)
      mkdir -p /tmp/records
      timeout -k 10 ${SP_TIMEOUT:-240} python3 experiments/gluon_swiglu_probe.py ${SP_ARGS:-} --json /tmp/records/gluon_swiglu_probe.json 2>&1 | tee /tmp/records/gluon_swiglu_probe.log | tail -30;;
    integritycost) # what the red-team fixes cost per timed iteration and per message (experiments/integrity_cost.py)
      mkdir -p /tmp/records
      python3 experiments/integrity_cost.py 2>&1 | tee /tmp/records/integrity_cost.txt;;
    strict-margins) # issue 25: strict-verdict errors of the shipped solutions and the near-miss canaries at contest
                    # sizes (SM_LIMIT workloads per definition, spread over the set; SM_SEEDS draws each)
      mkdir -p /tmp/records
      timeout -k 10 ${SM_TIMEOUT:-420} python3 experiments/strict_margins.py --device cuda --full --seeds ${SM_SEEDS:-2} \
        --limit ${SM_LIMIT:-6} --json /tmp/records/strict_margins.json 2>&1 | tee /tmp/records/strict_margins.log | tail -30;;
    moe-reference) # issue 25: our MoE reference against upstream's at the full size (on the CPU, ~18 GB of RAM)
      mkdir -p /tmp/records
      KW_SLOW_TESTS=1 timeout -k 10 ${MR_TIMEOUT:-500} python3 -m pytest -q -rA -p no:cacheprovider \
        "tests/definitions/test_references.py::test_moe_reference_equals_upstream_full_size" 2>&1 \
        | tee /tmp/records/moe_reference_full_size.log | tail -15;;
    boundary-probe) # issue 22: which CUDA step fails behind the boundary's privilege drop, with the default and an unlimited memlock limit
      mkdir -p /tmp/records; u=1500000077; drop="setpriv --reuid=$u --regid=$u --clear-groups --inh-caps=-all --bounding-set=-all --no-new-privs --"
      cp experiments/boundary_cuda_probe.py /tmp/bprobe.py; chmod 644 /tmp/bprobe.py
      { ls -l /dev/nvidia* | head; ulimit -l; python3 /tmp/bprobe.py
        HOME=/tmp timeout 60 $drop python3 /tmp/bprobe.py
        HOME=/tmp timeout 60 prlimit --memlock=unlimited:unlimited $drop python3 /tmp/bprobe.py; } 2>&1 | tee /tmp/records/boundary-probe.log;;
    fd-share-probe) # issue 22: does a VMM buffer exported as a file descriptor cross the uid change and a PID namespace (legacy CUDA IPC beside it)?
      mkdir -p /tmp/records; cp experiments/cuda_fd_share_probe.py /tmp/fdprobe.py; chmod 644 /tmp/fdprobe.py
      timeout -k 5 ${FD_TIMEOUT:-120} python3 /tmp/fdprobe.py 2>&1 | tee /tmp/records/cuda-fd-share-probe.log;;
    pack) tar czf "$OUT/records.tgz" -C /tmp/records . && ls -la "$OUT";;
    *) echo "unknown stage $stage";;
  esac
done
