"""Can a block-scaled FP8 GEMM keep the next wgmma in flight while it promotes the previous one?
(Prototype for the MoE prefill GEMMs, docs/history/moe.md, v5 "Next"; not used by any solution.)

Triton 3.6 compiles ``acc += tl.dot(a, b) * scale`` to ``wgmma.wait_group 0`` after every 128-K
block, so the tensor cores idle while the fp32 promotion runs.  This Gluon kernel issues the MMA of
K block k (a fresh product, ``use_acc=False``), then waits with ONE group still outstanding
(``warpgroup_mma_wait(num_outstanding=1)``) for the product of block k-1 and promotes that one:

    prod[k]   = A[:, kK:(k+1)K] @ B[:, kK:(k+1)K]^T          (async wgmma, FP8 -> fp32)
    acc      += prod[k-1] * (a_scale[:, k-1] x b_scale[k-1])   (while prod[k] runs)

Operands: A [M, K] fp8 e4m3 with 1x128 scales a_scale [K/128, M] fp32 (transposed, as the MoE's
activation scales); B [N, K] fp8 e4m3 with 128x128 block scales b_scale [N/128, K/128] fp32;
C [M, N] bf16.  Tiles BLOCK_M x BLOCK_N with BLOCK_N = 128 (one B scale per K block), BLOCK_K = 128,
NUM_STAGES shared-memory stages filled by TMA with one mbarrier each; K / 128 must be even.

State (2026-11-29, CPU compile only, never run on a GPU; `--aot` output recorded in
results/cpu-aot/2026-11-29-v5/gluon_blockscale_probe.txt): for K = 2048 the Gluon kernel compiles
for sm_90a with 15 `wgmma.wait_group 1` and one final `wait_group 0` (234 registers, no spills,
131 KB of shared memory; the Triton tile: one `wait_group 0` per K block, 154 registers), and
ptxas prints no serialisation note.  Drafts needed two changes to get there (not recorded): two
product registers used in turn, each MMA writing over its own dead previous product (copying the
in-flight product, `prev = cur`, drew an injected wait, C7517), and an unrolled K loop (K
constexpr; with a runtime loop, the product in flight across the back edge drew C7514, every
wgmma serialised).  Correctness and speed are for the GPU run below.

    python experiments/gluon_blockscale_probe.py --aot        # CPU: sm_90a compile, registers, waits
    python experiments/gluon_blockscale_probe.py               # GPU: correctness vs torch, then timing
                                                           # against the same tile in plain Triton
"""
from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import (
    fence_async_shared,
    mbarrier,
    tma,
    warpgroup_mma,
    warpgroup_mma_wait,
)

SCALE_BLK = 128


@gluon.jit
def _issue(a_bufs, b_bufs, ready, k, prod, NUM_STAGES: gl.constexpr):
    """Wait for K block k's tiles and start its MMA into ``prod`` (whose old value is dead)."""
    s = k % NUM_STAGES
    mbarrier.wait(ready.index(s), phase=(k // NUM_STAGES) & 1)
    return warpgroup_mma(a_bufs.index(s), b_bufs.index(s).permute((1, 0)), prod, use_acc=False, is_async=True)


@gluon.jit
def _promote(acc, prod, a_scale_ptr, b_scales, rows, row_ok, M, k, SCALES: gl.constexpr):
    """acc += prod * (a_scale[k, rows] x b_scale[k]): the fp32 promotion of K block k
    (SCALES = False, a diagnostic: acc += prod, no scale loads)."""
    if SCALES:
        a_s = gl.load(a_scale_ptr + k * M + rows, mask=row_ok, other=0.0)
        return acc + prod * (a_s * gl.load(b_scales + k))[:, None]
    else:
        return acc + prod


@gluon.jit
def _refill(a_desc, b_desc, a_bufs, b_bufs, ready, k, KB, off_m, off_n, nbytes: gl.constexpr,
            NUM_STAGES: gl.constexpr):
    """K block k's MMA has finished: load block k + NUM_STAGES into its stage."""
    nxt = k + NUM_STAGES
    if nxt < KB:
        s = k % NUM_STAGES
        mbarrier.expect(ready.index(s), nbytes)
        tma.async_copy_global_to_shared(a_desc, [off_m, nxt * 128], ready.index(s), a_bufs.index(s))
        tma.async_copy_global_to_shared(b_desc, [off_n, nxt * 128], ready.index(s), b_bufs.index(s))


@gluon.jit
def blockscale_gemm_gluon(a_desc, b_desc, a_scale_ptr, b_scale_ptr, c_ptr, c_desc, M, N, K: gl.constexpr,
                          BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                          num_warps: gl.constexpr, IN_FLIGHT: gl.constexpr = 1, SCALES: gl.constexpr = True,
                          TMA_STORE: gl.constexpr = False, GROUP: gl.constexpr = 0):
    """Diagnostics (2026-11-30 probe): IN_FLIGHT = 0 waits for every MMA; SCALES = False drops the
    scale loads and multiplies; TMA_STORE = True writes C through shared memory and a TMA store
    (c_desc, block [BLOCK_M, BLOCK_N] bf16) instead of per-thread stores from the MMA layout;
    GROUP > 0 replaces the fully unrolled K loop (cubin 159 KB at K = 2048: does the instruction
    cache hold it?) by a runtime loop over groups of GROUP K blocks (KB % GROUP == 0)."""
    BLOCK_K: gl.constexpr = 128
    pid_m = gl.program_id(0)
    pid_n = gl.program_id(1)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    KB: gl.constexpr = K // BLOCK_K

    # 2 warpgroups stacked along M: each owns 64 rows x BLOCK_N columns of every product
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 32])
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)

    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(b_desc.dtype, [NUM_STAGES] + b_desc.block_type.shape, b_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
    nbytes: gl.constexpr = a_desc.block_type.nbytes + b_desc.block_type.nbytes

    # prologue: fill every stage
    for i in gl.static_range(NUM_STAGES):
        if i < KB:
            mbarrier.expect(ready.index(i), nbytes)
            tma.async_copy_global_to_shared(a_desc, [off_m, i * BLOCK_K], ready.index(i), a_bufs.index(i))
            tma.async_copy_global_to_shared(b_desc, [off_n, i * BLOCK_K], ready.index(i), b_bufs.index(i))

    rows = off_m + gl.arange(0, BLOCK_M, layout=row_layout)
    row_ok = rows < M
    b_scales = b_scale_ptr + pid_n * KB
    acc = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
    # two product registers, used in turn, each MMA writing over its own dead previous product
    # (use_acc=False): no register copy of an in-flight product, which would make ptxas serialise
    p0 = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
    p1 = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)

    if GROUP == 0:
        mbarrier.wait(ready.index(0), phase=0)
        p0 = warpgroup_mma(a_bufs.index(0), b_bufs.index(0).permute((1, 0)), p0, use_acc=False, is_async=True)
        # K blocks in pairs (k, k+1) after block 0; KB is even (H = 7168 and I = 2048 give 56 and 16).
        # The loop is unrolled (K is constexpr): with a runtime loop the product in flight across the
        # back edge makes ptxas serialise every wgmma (C7514); unrolled, it keeps one in flight.
        for k in gl.static_range(1, KB - 1, 2):
            p1 = _issue(a_bufs, b_bufs, ready, k, p1, NUM_STAGES)
            p0 = warpgroup_mma_wait(num_outstanding=IN_FLIGHT, deps=(p0,))
            acc = _promote(acc, p0, a_scale_ptr, b_scales, rows, row_ok, M, k - 1, SCALES)
            _refill(a_desc, b_desc, a_bufs, b_bufs, ready, k - 1, KB, off_m, off_n, nbytes, NUM_STAGES)
            p0 = _issue(a_bufs, b_bufs, ready, k + 1, p0, NUM_STAGES)
            p1 = warpgroup_mma_wait(num_outstanding=IN_FLIGHT, deps=(p1,))
            acc = _promote(acc, p1, a_scale_ptr, b_scales, rows, row_ok, M, k, SCALES)
            _refill(a_desc, b_desc, a_bufs, b_bufs, ready, k, KB, off_m, off_n, nbytes, NUM_STAGES)
        p1 = _issue(a_bufs, b_bufs, ready, KB - 1, p1, NUM_STAGES)
        p0 = warpgroup_mma_wait(num_outstanding=IN_FLIGHT, deps=(p0,))
        acc = _promote(acc, p0, a_scale_ptr, b_scales, rows, row_ok, M, KB - 2, SCALES)
        p1 = warpgroup_mma_wait(num_outstanding=0, deps=(p1,))
        acc = _promote(acc, p1, a_scale_ptr, b_scales, rows, row_ok, M, KB - 1, SCALES)
    else:
        # a runtime loop over groups of GROUP K blocks: one MMA in flight inside a group, none
        # across the back edge (the group ends with wait 0), so the code stays small; GROUP = 1 is
        # the plain pipelined loop (every MMA waited for before its promotion)
        for g in range(0, KB, GROUP):
            p0 = _issue(a_bufs, b_bufs, ready, g, p0, NUM_STAGES)
            for j in gl.static_range(1, GROUP):
                if j % 2 == 1:
                    p1 = _issue(a_bufs, b_bufs, ready, g + j, p1, NUM_STAGES)
                    p0 = warpgroup_mma_wait(num_outstanding=IN_FLIGHT, deps=(p0,))
                    acc = _promote(acc, p0, a_scale_ptr, b_scales, rows, row_ok, M, g + j - 1, SCALES)
                else:
                    p0 = _issue(a_bufs, b_bufs, ready, g + j, p0, NUM_STAGES)
                    p1 = warpgroup_mma_wait(num_outstanding=IN_FLIGHT, deps=(p1,))
                    acc = _promote(acc, p1, a_scale_ptr, b_scales, rows, row_ok, M, g + j - 1, SCALES)
                _refill(a_desc, b_desc, a_bufs, b_bufs, ready, g + j - 1, KB, off_m, off_n, nbytes, NUM_STAGES)
            if (GROUP - 1) % 2 == 1:
                p1 = warpgroup_mma_wait(num_outstanding=0, deps=(p1,))
                acc = _promote(acc, p1, a_scale_ptr, b_scales, rows, row_ok, M, g + GROUP - 1, SCALES)
            else:
                p0 = warpgroup_mma_wait(num_outstanding=0, deps=(p0,))
                acc = _promote(acc, p0, a_scale_ptr, b_scales, rows, row_ok, M, g + GROUP - 1, SCALES)
            _refill(a_desc, b_desc, a_bufs, b_bufs, ready, g + GROUP - 1, KB, off_m, off_n, nbytes, NUM_STAGES)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(ready.index(i))

    if TMA_STORE:
        c_smem = gl.allocate_shared_memory(gl.bfloat16, [BLOCK_M, BLOCK_N], c_desc.layout)
        c_smem.store(acc.to(gl.bfloat16))
        fence_async_shared()
        tma.async_copy_shared_to_global(c_desc, [off_m, off_n], c_smem)
        tma.store_wait(pendings=0)
    else:
        cols = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma_layout))
        c_ptrs = c_ptr + rows.to(gl.int64)[:, None] * N + cols[None, :]
        gl.store(c_ptrs, acc.to(gl.bfloat16), mask=row_ok[:, None] & (cols < N)[None, :])


@triton.jit
def blockscale_gemm_triton(a_desc, b_desc, a_scale_ptr, b_scale_ptr, c_ptr, M, N, K,
                           BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, VECTOR_SCALE: tl.constexpr = False):
    """The same tile in plain Triton (the reference for the comparison).  VECTOR_SCALE: the weight
    scale as a per-column vector, ``dot * (a_s[:, None] * b_s[None, :])``, as the MoE GEMM2 wrote
    it up to v5 (an outer product per element) instead of a scalar per 128-column tile."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    KB = K // 128
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, KB):
        a = a_desc.load([pid_m * BLOCK_M, k * 128])
        b = b_desc.load([pid_n * BLOCK_N, k * 128])
        a_s = tl.load(a_scale_ptr + k * M + rows, mask=rows < M, other=0.0)
        if VECTOR_SCALE:
            b_s = tl.load(b_scale_ptr + (cols // 128) * KB + k)
            acc += tl.dot(a, b.T) * (a_s[:, None] * b_s[None, :])
        else:
            b_s = tl.load(b_scale_ptr + pid_n * KB + k)
            acc += tl.dot(a, b.T) * (a_s * b_s)[:, None]
    tl.store(c_ptr + rows.to(tl.int64)[:, None] * N + cols[None, :], acc.to(tl.bfloat16),
             mask=(rows < M)[:, None] & (cols < N)[None, :])


@triton.jit
def plain_gemm_triton(a_desc, b_desc, a_scale_ptr, b_scale_ptr, c_ptr, M, N, K,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, WARP_SPECIALIZE: tl.constexpr):
    """Controls for the AOT comparison: WARP_SPECIALIZE = False: the same loop without block
    scales (``acc = tl.dot(a, b.T, acc)``); True: the block-scaled loop of blockscale_gemm_triton
    with ``tl.range(..., warp_specialize=True)``."""
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    KB = K // 128
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in tl.range(0, KB, warp_specialize=WARP_SPECIALIZE):
        a = a_desc.load([pid_m * BLOCK_M, k * 128])
        b = b_desc.load([pid_n * BLOCK_N, k * 128])
        if WARP_SPECIALIZE:
            a_s = tl.load(a_scale_ptr + k * M + rows, mask=rows < M, other=0.0)
            acc += tl.dot(a, b.T) * (a_s * tl.load(b_scale_ptr + pid_n * KB + k))[:, None]
        else:
            acc = tl.dot(a, b.T, acc)
    tl.store(c_ptr + rows.to(tl.int64)[:, None] * N + cols[None, :], acc.to(tl.bfloat16),
             mask=(rows < M)[:, None] & (cols < N)[None, :])


def aot() -> None:
    """sm_90a compile on the CPU: registers, spills, shared memory and the wgmma waits."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.experimental.gluon._runtime import GluonASTSource

    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    bm, bn, stages, warps = 128, 128, 4, 8
    layout_a = gl.NVMMASharedLayout.get_default_for([bm, 128], gl.float8e4nv)
    layout_b = gl.NVMMASharedLayout.get_default_for([bn, 128], gl.float8e4nv)
    jobs = {
        "gluon": (GluonASTSource, blockscale_gemm_gluon,
                  dict(a_desc=f"tensordesc<fp8e4nv[{bm},128],{layout_a!r}>",
                       b_desc=f"tensordesc<fp8e4nv[{bn},128],{layout_b!r}>"),
                  dict(BLOCK_M=bm, BLOCK_N=bn, NUM_STAGES=stages, num_warps=warps, IN_FLIGHT=1)),
        "triton": (ASTSource, blockscale_gemm_triton,
                   dict(a_desc=f"tensordesc<fp8e4nv[{bm},128]>", b_desc=f"tensordesc<fp8e4nv[{bn},128]>"),
                   dict(BLOCK_M=bm, BLOCK_N=bn)),
        "triton-plain": (ASTSource, plain_gemm_triton,
                         dict(a_desc=f"tensordesc<fp8e4nv[{bm},128]>", b_desc=f"tensordesc<fp8e4nv[{bn},128]>"),
                         dict(BLOCK_M=bm, BLOCK_N=bn, WARP_SPECIALIZE=False)),
        "triton-ws": (ASTSource, plain_gemm_triton,
                      dict(a_desc=f"tensordesc<fp8e4nv[{bm},128]>", b_desc=f"tensordesc<fp8e4nv[{bn},128]>"),
                      dict(BLOCK_M=bm, BLOCK_N=bn, WARP_SPECIALIZE=True)),
    }
    for K, grp in ((2048, 1), (2048, 2), (2048, 4), (7168, 0), (7168, 4)):
        jobs[f"gluon-K{K}-g{grp}"] = (GluonASTSource, blockscale_gemm_gluon, jobs["gluon"][2],
                                      dict(jobs["gluon"][3], GROUP=grp, K_AOT=K))
    for tag, (source, fn, descs, const) in jobs.items():
        sig = dict(descs, a_scale_ptr="*fp32", b_scale_ptr="*fp32", c_ptr="*bf16", M="i32", N="i32", K="i32")
        if tag.startswith("gluon"):
            layout_c = gl.NVMMASharedLayout.get_default_for([bm, bn], gl.bfloat16)
            sig = dict(descs, a_scale_ptr="*fp32", b_scale_ptr="*fp32", c_ptr="*bf16",
                       c_desc=f"tensordesc<bf16[{bm},{bn}],{layout_c!r}>", M="i32", N="i32", K="constexpr")
            const = dict(const)
            const = dict(const, K=const.pop("K_AOT", 2048), SCALES=True, TMA_STORE=False,
                         GROUP=const.get("GROUP", 0))       # default: GEMM2's K (I = 2048)
        sig.update({k: "constexpr" for k in const})
        attrs = {(i,): [["tt.divisibility", 16]] for i, v in enumerate(sig.values()) if v.startswith("*")}
        k = triton.compile(source(fn=fn, signature=sig, constexprs=const, attrs=attrs),
                           target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": stages})
        ptx = k.asm["ptx"]
        path = f"/tmp/blockscale_{tag}.ptx"
        with open(path, "w") as fh:
            fh.write(ptx)
        cubin = path[:-4] + ".cubin"
        r = subprocess.run([ptxas, "-arch=sm_90a", "-v", path, "-o", cubin], capture_output=True, text=True)
        used = [ln.split("info    :")[-1].strip() for ln in r.stderr.splitlines() if "Used" in ln or "spill" in ln]
        waits = re.findall(r"wgmma.wait_group.sync.aligned (\d+)", ptx)
        notes = [ln.split("info    :")[-1].strip()[:90] for ln in r.stderr.splitlines() if "(C75" in ln]
        size = os.path.getsize(cubin) if os.path.exists(cubin) else 0
        print(f"{tag:<16} smem {k.metadata.shared:>7} B  cubin {size:>7} B  waits {''.join(waits)}  "
              f"setmaxnreg {ptx.count('setmaxnreg')}  {used}  ptxas notes: {notes or 'none'}")


SHAPES = ((2048, 7168, 2048), (8192, 7168, 2048), (8192, 4096, 7168))   # GEMM2, GEMM2, GEMM1 (M, N, K)


def gpu(stage_counts: list[int], json_path: str | None, triton_configs=(), shapes=SHAPES,
        ceilings: bool = True) -> None:
    """Correctness against torch and time (triton.testing.do_bench, µs) at GEMM2 and GEMM1 shapes:
    the Gluon tile at each stage count, the Triton block-scaled tile (and each of triton_configs:
    (BLOCK_M, BLOCK_N, warps, stages, vector weight scale)), and two ceilings without
    block scales (the Triton plain tile and torch._scaled_mm with per-tensor scales, cuBLAS)."""
    import json

    import torch

    torch.manual_seed(0)
    dev = torch.device("cuda")
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor
    from triton.tools.tensor_descriptor import TensorDescriptor

    bm, bn, warps = 128, 128, 8
    rows_out = []
    for M, N, K in shapes:
        a = (torch.randn(M, K, device=dev) * 0.5).to(torch.float8_e4m3fn)
        b = (torch.randn(N, K, device=dev) * 0.5).to(torch.float8_e4m3fn)
        a_scale = torch.rand(K // 128, M, device=dev) + 0.5
        b_scale = torch.rand(N // 128, K // 128, device=dev) + 0.5
        ref = ((a.float() * a_scale.T.repeat_interleave(128, 1))
               @ (b.float() * b_scale.repeat_interleave(128, 0).repeat_interleave(128, 1)).T)
        la = gl.NVMMASharedLayout.get_default_for([bm, 128], gl.float8e4nv)
        lb = gl.NVMMASharedLayout.get_default_for([bn, 128], gl.float8e4nv)
        grid = (triton.cdiv(M, bm), triton.cdiv(N, bn))
        one = torch.ones((), device=dev)
        lc = gl.NVMMASharedLayout.get_default_for([bm, bn], gl.bfloat16)
        runs = {}

        def run_gluon(c, st=4, **flags):
            blockscale_gemm_gluon[grid](GluonDescriptor(a, list(a.shape), list(a.stride()), [bm, 128], la),
                                        GluonDescriptor(b, list(b.shape), list(b.stride()), [bn, 128], lb),
                                        a_scale, b_scale, c, GluonDescriptor(c, list(c.shape), list(c.stride()),
                                                                             [bm, bn], lc),
                                        M, N, K=K, BLOCK_M=bm, BLOCK_N=bn, NUM_STAGES=st, num_warps=warps,
                                        **flags)
        for st in stage_counts:
            runs[f"gluon-s{st}"] = (lambda c, st=st: run_gluon(c, st), True)
        if stage_counts:   # diagnostics at 4 stages: which part makes the Gluon tile slow
            runs["gluon-s4-wait0"] = (lambda c: run_gluon(c, IN_FLIGHT=0), True)
            runs["gluon-s4-tmastore"] = (lambda c: run_gluon(c, TMA_STORE=True), True)
            runs["gluon-s4-noscale"] = (lambda c: run_gluon(c, SCALES=False), False)
            runs["gluon-s4-noscale-wait0"] = (lambda c: run_gluon(c, SCALES=False, IN_FLIGHT=0), False)
            for grp in (1, 2, 4):   # runtime K loop over groups: small code (see the --aot cubin sizes)
                runs[f"gluon-s4-g{grp}"] = (lambda c, grp=grp: run_gluon(c, GROUP=grp), True)

        def run_triton(c):
            blockscale_gemm_triton[grid](TensorDescriptor.from_tensor(a, [bm, 128]),
                                         TensorDescriptor.from_tensor(b, [bn, 128]),
                                         a_scale, b_scale, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn,
                                         num_warps=warps, num_stages=4)

        def run_plain(c):
            plain_gemm_triton[grid](TensorDescriptor.from_tensor(a, [bm, 128]),
                                    TensorDescriptor.from_tensor(b, [bn, 128]),
                                    a_scale, b_scale, c, M, N, K, BLOCK_M=bm, BLOCK_N=bn,
                                    WARP_SPECIALIZE=False, num_warps=warps, num_stages=4)

        def run_cublas(c):
            torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.bfloat16, out=c)

        if ceilings:
            runs["triton"] = (run_triton, True)
        for (tbm, tbn, tw, ts, vec) in triton_configs:
            def run_cfg(c, tbm=tbm, tbn=tbn, tw=tw, ts=ts, vec=vec):
                blockscale_gemm_triton[(triton.cdiv(M, tbm), triton.cdiv(N, tbn))](
                    TensorDescriptor.from_tensor(a, [tbm, 128]), TensorDescriptor.from_tensor(b, [tbn, 128]),
                    a_scale, b_scale, c, M, N, K, BLOCK_M=tbm, BLOCK_N=tbn, VECTOR_SCALE=vec,
                    num_warps=tw, num_stages=ts)
            runs[f"triton-m{tbm}n{tbn}w{tw}s{ts}{'v' if vec else ''}"] = (run_cfg, True)
        if ceilings:
            runs["triton-noscale"] = (run_plain, False)
            runs["cublas-noscale"] = (run_cublas, False)
        times = {}
        for tag, (fn, checked) in runs.items():
            c = torch.empty(M, N, device=dev, dtype=torch.bfloat16)
            try:
                fn(c)
                torch.cuda.synchronize()
            except Exception as exc:  # a variant that does not compile or launch is reported, not fatal
                print(f"M={M} N={N} K={K} {tag:<15} failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                continue
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item() if checked else float("nan")
            ms = triton.testing.do_bench(lambda: fn(c), warmup=10, rep=100)
            tflops = 2 * M * N * K / (ms * 1e-3) / 1e12
            times[tag] = ms
            rows_out.append(dict(M=M, N=N, K=K, variant=tag, rel_max_err=err, us=ms * 1e3, tflops=tflops))
            print(f"M={M} N={N} K={K} {tag:<15} rel.max.err {err:.2e}  {ms * 1e3:8.1f} µs  {tflops:6.0f} TFLOP/s",
                  flush=True)
        best = min((v for k, v in times.items() if k.startswith("gluon")), default=None)
        if best is not None and "triton" in times:
            print(f"  best gluon / triton time: {best / times['triton']:.2f}", flush=True)
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(rows_out, fh, indent=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aot", action="store_true", help="compile for sm_90a on the CPU and print the waits")
    ap.add_argument("--stages", default="3,4,5,6", help="shared-memory stage counts of the Gluon tile (GPU run)")
    ap.add_argument("--triton-configs", default="",
                    help="extra Triton tiles, e.g. 128x128w8s3,64x128w4s4,128x128w8s4v (v: vector weight scale)")
    ap.add_argument("--shapes", default=None, help="MxNxK list (default: GEMM2 at M 2048 and 8192, GEMM1 at 8192)")
    ap.add_argument("--no-ceilings", action="store_true", help="skip the Triton tile and the no-scale ceilings")
    ap.add_argument("--json", default=None, help="write the GPU rows (variant, µs, TFLOP/s, error) here")
    args = ap.parse_args()
    if args.aot:
        aot()
    else:
        if not os.environ.get("CUDA_VISIBLE_DEVICES", "x"):
            sys.exit("no GPU: run with --aot")
        configs = []
        for spec in filter(None, args.triton_configs.split(",")):
            m = re.fullmatch(r"(\d+)x(\d+)w(\d+)s(\d+)(v?)", spec)
            if not m:
                sys.exit(f"bad --triton-configs entry {spec!r} (want e.g. 128x128w8s3)")
            configs.append((int(m[1]), int(m[2]), int(m[3]), int(m[4]), bool(m[5])))
        shapes = SHAPES if not args.shapes else [tuple(int(v) for v in sh.split("x")) for sh in args.shapes.split(",")]
        gpu([int(x) for x in args.stages.split(",")] if args.stages else [], args.json, configs, shapes,
            not args.no_ceilings)
