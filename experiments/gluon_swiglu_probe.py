"""The MoE's GEMM1 tile (up and gate accumulators, 128-K block-scale promotion, SwiGLU epilogue)
in Gluon with one K block's MMAs in flight while the previous block is promoted, against the same
tile in plain Triton.  A probe for the MoE prefill GEMMs (docs/history/moe.md); no solution uses it.

Why a separate probe: the dense Gluon tile of ``gluon_blockscale_probe.py`` beat Triton at the
GEMM1 shape once its K loop was a runtime loop over groups of K blocks (v7 record), but the MoE's
GEMM1 holds two accumulators.  With the shipped QG 128 on 16 warps (512 threads, at most 128
registers each) the accumulators and one product set already take 128 registers, so the in-flight
scheme needs a narrower tile: here BLOCK_N = QG = 64 on 8 warps (2 warpgroups stacked along M):
accumulators 2 x 32 registers, two product sets 4 x 32, about 192 in all.

Operands (dense, no gather): A [M, K] fp8 e4m3 with 1x128 scales a_scale [K/128, M] fp32;
W13 [2I, K] fp8 with 128x128 block scales w_scale [2I/128, K/128] fp32, rows [0, I) the up half
and [I, 2I) the gate half (the definition's layout); C [M, I] bf16 = silu(gate) * up.

Also the warp-specialised form (``gluon-ws`` rows, ``swiglu_gemm1_gluon_ws``): a TMA producer
warpgroup and two consumer warpgroups that receive its registers (setmaxnreg), at BLOCK_N = 128.

    python experiments/gluon_swiglu_probe.py --aot      # CPU: sm_90a compile, registers, waits, code size
    python experiments/gluon_swiglu_probe.py            # GPU: correctness vs torch, then timing
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys

import triton
import triton.language as tl
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.hopper import mbarrier, tma, warpgroup_mma, warpgroup_mma_wait


@gluon.jit
def _issue(a_bufs, b_bufs, ready, k, p_up, p_gate, NUM_STAGES: gl.constexpr):
    """Wait for K block k's tiles, then start its two MMAs (up, gate) into dead product registers."""
    s = k % NUM_STAGES
    mbarrier.wait(ready.index(s), phase=(k // NUM_STAGES) & 1)
    p_up = warpgroup_mma(a_bufs.index(s), b_bufs.index(2 * s).permute((1, 0)), p_up, use_acc=False, is_async=True)
    p_gate = warpgroup_mma(a_bufs.index(s), b_bufs.index(2 * s + 1).permute((1, 0)), p_gate, use_acc=False,
                           is_async=True)
    return p_up, p_gate


@gluon.jit
def _promote(acc_up, acc_gate, p_up, p_gate, a_scale_ptr, s_up, s_gate, rows, row_ok, M, k):
    """The fp32 promotion of K block k: acc += product x a_scale[k, row] x w_scale[block, k]."""
    a_s = gl.load(a_scale_ptr + k * M + rows, mask=row_ok, other=0.0)
    return (acc_up + p_up * (a_s * gl.load(s_up + k))[:, None],
            acc_gate + p_gate * (a_s * gl.load(s_gate + k))[:, None])


@gluon.jit
def _load(a_desc, w_desc, a_bufs, b_bufs, ready, k, KB, off_m, off_n, I, nbytes: gl.constexpr,
          NUM_STAGES: gl.constexpr):
    """Load K block k (if any) into its stage: the A tile and the up and gate rows of W13."""
    if k < KB:
        s = k % NUM_STAGES
        mbarrier.expect(ready.index(s), nbytes)
        tma.async_copy_global_to_shared(a_desc, [off_m, k * 128], ready.index(s), a_bufs.index(s))
        tma.async_copy_global_to_shared(w_desc, [off_n, k * 128], ready.index(s), b_bufs.index(2 * s))
        tma.async_copy_global_to_shared(w_desc, [I + off_n, k * 128], ready.index(s), b_bufs.index(2 * s + 1))


@gluon.jit
def swiglu_gemm1_gluon(a_desc, w_desc, a_scale_ptr, w_scale_ptr, c_ptr, M, I, K,
                       BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                       GROUP: gl.constexpr, num_warps: gl.constexpr):
    """C[:, n0:n0+BLOCK_N] = silu(A W_gate^T) * (A W_up^T) for one BLOCK_M x BLOCK_N tile.  A runtime
    loop over groups of GROUP K blocks (K / 128 must be a multiple of GROUP): inside a group the
    MMAs of block j run while block j-1 is promoted (two product sets used in turn); a group ends
    with every MMA waited for, so no product is in flight across the back edge."""
    pid_m = gl.program_id(0)
    pid_n = gl.program_id(1)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    KB = K // 128
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[num_warps, 1], instr_shape=[16, BLOCK_N, 32])
    row_layout: gl.constexpr = gl.SliceLayout(1, mma_layout)

    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(w_desc.dtype, [2 * NUM_STAGES] + w_desc.block_type.shape, w_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
    nbytes: gl.constexpr = a_desc.block_type.nbytes + 2 * w_desc.block_type.nbytes
    for i in gl.static_range(NUM_STAGES):
        _load(a_desc, w_desc, a_bufs, b_bufs, ready, i, KB, off_m, off_n, I, nbytes, NUM_STAGES)

    rows = off_m + gl.arange(0, BLOCK_M, layout=row_layout)
    row_ok = rows < M
    s_up = w_scale_ptr + (off_n // 128) * KB
    s_gate = w_scale_ptr + ((I + off_n) // 128) * KB
    acc_up = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
    acc_gate = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
    p0u = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
    p0g = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
    p1u = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
    p1g = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
    for g in range(0, KB, GROUP):
        p0u, p0g = _issue(a_bufs, b_bufs, ready, g, p0u, p0g, NUM_STAGES)
        for j in gl.static_range(1, GROUP):
            if j % 2 == 1:
                p1u, p1g = _issue(a_bufs, b_bufs, ready, g + j, p1u, p1g, NUM_STAGES)
                p0u, p0g = warpgroup_mma_wait(num_outstanding=2, deps=(p0u, p0g))
                acc_up, acc_gate = _promote(acc_up, acc_gate, p0u, p0g, a_scale_ptr, s_up, s_gate, rows, row_ok,
                                            M, g + j - 1)
            else:
                p0u, p0g = _issue(a_bufs, b_bufs, ready, g + j, p0u, p0g, NUM_STAGES)
                p1u, p1g = warpgroup_mma_wait(num_outstanding=2, deps=(p1u, p1g))
                acc_up, acc_gate = _promote(acc_up, acc_gate, p1u, p1g, a_scale_ptr, s_up, s_gate, rows, row_ok,
                                            M, g + j - 1)
            _load(a_desc, w_desc, a_bufs, b_bufs, ready, g + j - 1 + NUM_STAGES, KB, off_m, off_n, I, nbytes,
                  NUM_STAGES)
        if (GROUP - 1) % 2 == 1:
            p1u, p1g = warpgroup_mma_wait(num_outstanding=0, deps=(p1u, p1g))
            acc_up, acc_gate = _promote(acc_up, acc_gate, p1u, p1g, a_scale_ptr, s_up, s_gate, rows, row_ok,
                                        M, g + GROUP - 1)
        else:
            p0u, p0g = warpgroup_mma_wait(num_outstanding=0, deps=(p0u, p0g))
            acc_up, acc_gate = _promote(acc_up, acc_gate, p0u, p0g, a_scale_ptr, s_up, s_gate, rows, row_ok,
                                        M, g + GROUP - 1)
        _load(a_desc, w_desc, a_bufs, b_bufs, ready, g + GROUP - 1 + NUM_STAGES, KB, off_m, off_n, I, nbytes,
              NUM_STAGES)
    for i in gl.static_range(NUM_STAGES):
        mbarrier.invalidate(ready.index(i))

    c = acc_gate / (1.0 + gl.exp(-acc_gate)) * acc_up
    cols = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma_layout))
    gl.store(c_ptr + rows.to(gl.int64)[:, None] * I + cols[None, :], c.to(gl.bfloat16), mask=row_ok[:, None])


@triton.jit
def swiglu_gemm1_triton(a_desc, w_desc, a_scale_ptr, w_scale_ptr, c_ptr, M, I, K,
                        BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """The same tile as the shipped TMA GEMM1 writes it (two dots per K block, each promoted
    right after its MMA), without the MoE's row gather."""
    off_m = tl.program_id(0) * BLOCK_M
    off_n = tl.program_id(1) * BLOCK_N
    rows = off_m + tl.arange(0, BLOCK_M)
    cols = off_n + tl.arange(0, BLOCK_N)
    KB = K // 128
    s_up = w_scale_ptr + (off_n // 128) * KB
    s_gate = w_scale_ptr + ((I + off_n) // 128) * KB
    acc_up = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_gate = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, KB):
        a = a_desc.load([off_m, k * 128])
        a_s = tl.load(a_scale_ptr + k * M + rows, mask=rows < M, other=0.0)
        acc_up += tl.dot(a, w_desc.load([off_n, k * 128]).T) * (a_s * tl.load(s_up + k))[:, None]
        acc_gate += tl.dot(a, w_desc.load([I + off_n, k * 128]).T) * (a_s * tl.load(s_gate + k))[:, None]
    c = acc_gate / (1.0 + tl.exp(-acc_gate)) * acc_up
    tl.store(c_ptr + rows.to(tl.int64)[:, None] * I + cols[None, :], c.to(tl.bfloat16), mask=(rows < M)[:, None])


# Warp-specialised form (DeepGEMM's structure): a producer warpgroup
# issues the TMA loads and gives its registers away (setmaxnreg: 40 a thread), and the 8-warp
# default partition (two consumer warpgroups, 64 rows each, up to 232 registers) runs the MMAs.
# Each consumer holds the up and gate accumulators of 128 columns (128 registers) and one product
# (64): the up MMA, its promotion, then the gate MMA and its promotion, so nothing is in flight
# inside a warpgroup; the two consumers and the producer overlap one another instead.  C keeps
# 128-column scale groups (QG 128), so GEMM2 would be unchanged.
WS_PRODUCER_REGS = 40
WS_MAXNREG = 168        # 12 warps x 32 x 168 <= 64K registers; the producer's share goes to the consumers


@gluon.jit
def _ws_load(a_desc, w_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, I, KB, NUM_STAGES: gl.constexpr):
    """Producer partition: K block k into stage k % NUM_STAGES once the consumers released it
    (mbarriers start in phase 1 complete, so the first round passes)."""
    nbytes: gl.constexpr = a_desc.block_type.nbytes + 2 * w_desc.block_type.nbytes
    for k in range(KB):
        s = k % NUM_STAGES
        mbarrier.wait(empty.index(s), ((k // NUM_STAGES) & 1) ^ 1)
        mbarrier.expect(ready.index(s), nbytes)
        tma.async_copy_global_to_shared(a_desc, [off_m, k * 128], ready.index(s), a_bufs.index(s))
        tma.async_copy_global_to_shared(w_desc, [off_n, k * 128], ready.index(s), b_bufs.index(2 * s))
        tma.async_copy_global_to_shared(w_desc, [I + off_n, k * 128], ready.index(s), b_bufs.index(2 * s + 1))


@gluon.jit
def _ws_mma(a_bufs, b_bufs, ready, empty, a_scale_ptr, w_scale_ptr, c_ptr, off_m, off_n, M, I, KB,
            BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr):
    """Default partition (two consumer warpgroups): per K block the up MMA, wait, promote, then the
    gate MMA, wait, release the stage, promote; then the SwiGLU epilogue."""
    mma_layout: gl.constexpr = gl.NVMMADistributedLayout(
        version=[3, 0], warps_per_cta=[gl.num_warps(), 1], instr_shape=[16, BLOCK_N, 32])
    rows = off_m + gl.arange(0, BLOCK_M, layout=gl.SliceLayout(1, mma_layout))
    row_ok = rows < M
    s_up = w_scale_ptr + (off_n // 128) * KB
    s_gate = w_scale_ptr + ((I + off_n) // 128) * KB
    acc_up = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
    acc_gate = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
    prod = gl.zeros([BLOCK_M, BLOCK_N], gl.float32, layout=mma_layout)
    for k in range(KB):
        s = k % NUM_STAGES
        mbarrier.wait(ready.index(s), (k // NUM_STAGES) & 1)
        a_s = gl.load(a_scale_ptr + k * M + rows, mask=row_ok, other=0.0)
        prod = warpgroup_mma(a_bufs.index(s), b_bufs.index(2 * s).permute((1, 0)), prod, use_acc=False,
                             is_async=True)
        prod = warpgroup_mma_wait(num_outstanding=0, deps=(prod,))
        acc_up = acc_up + prod * (a_s * gl.load(s_up + k))[:, None]
        # The gate MMA's (unread: use_acc=False) accumulator operand is made to depend on the promoted
        # acc_up, so ptxas cannot start the gate MMA before the up promotion is done.  Left free, it
        # overlaps the two and keeps the up product alive next to the gate's: 4 x 64 registers, over
        # the consumers' 240, and 352-464 bytes of spills (CPU compile, results/cpu-aot/2026-11-30-v8).
        prod = warpgroup_mma(a_bufs.index(s), b_bufs.index(2 * s + 1).permute((1, 0)), acc_up * 0.0,
                             use_acc=False, is_async=True)
        prod = warpgroup_mma_wait(num_outstanding=0, deps=(prod,))
        mbarrier.arrive(empty.index(s), count=1)
        acc_gate = acc_gate + prod * (a_s * gl.load(s_gate + k))[:, None]
    c = acc_gate / (1.0 + gl.exp(-acc_gate)) * acc_up
    cols = off_n + gl.arange(0, BLOCK_N, layout=gl.SliceLayout(0, mma_layout))
    gl.store(c_ptr + rows.to(gl.int64)[:, None] * I + cols[None, :], c.to(gl.bfloat16), mask=row_ok[:, None])


@gluon.jit
def swiglu_gemm1_gluon_ws(a_desc, w_desc, a_scale_ptr, w_scale_ptr, c_ptr, M, I, K,
                          BLOCK_M: gl.constexpr, BLOCK_N: gl.constexpr, NUM_STAGES: gl.constexpr,
                          PRODUCER_REGS: gl.constexpr, num_warps: gl.constexpr):
    """The same C tile as swiglu_gemm1_gluon at BLOCK_N = 128, warp-specialised (see above)."""
    off_m = gl.program_id(0) * BLOCK_M
    off_n = gl.program_id(1) * BLOCK_N
    KB = K // 128
    a_bufs = gl.allocate_shared_memory(a_desc.dtype, [NUM_STAGES] + a_desc.block_type.shape, a_desc.layout)
    b_bufs = gl.allocate_shared_memory(w_desc.dtype, [2 * NUM_STAGES] + w_desc.block_type.shape, w_desc.layout)
    ready = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    empty = gl.allocate_shared_memory(gl.int64, [NUM_STAGES, 1], mbarrier.MBarrierLayout())
    for i in gl.static_range(NUM_STAGES):
        mbarrier.init(ready.index(i), count=1)
        mbarrier.init(empty.index(i), count=1)
    gl.warp_specialize([
        (_ws_mma, (a_bufs, b_bufs, ready, empty, a_scale_ptr, w_scale_ptr, c_ptr, off_m, off_n, M, I, KB,
                   BLOCK_M, BLOCK_N, NUM_STAGES)),
        (_ws_load, (a_desc, w_desc, a_bufs, b_bufs, ready, empty, off_m, off_n, I, KB, NUM_STAGES)),
    ], [4], [PRODUCER_REGS])


# (name, kind, BLOCK_M, BLOCK_N, warps, stages, GROUP): the Gluon tiles, and the Triton tile at the
# shipped prefill GEMM1 configuration (t12: 128 x 128 on 16 warps, 3 stages) and at the Gluon's width
VARIANTS = [
    ("gluon-n64-g1-s4", "gluon", 128, 64, 8, 4, 1),
    ("gluon-n64-g2-s4", "gluon", 128, 64, 8, 4, 2),
    ("gluon-n64-g4-s4", "gluon", 128, 64, 8, 4, 4),
    ("gluon-n64-g2-s6", "gluon", 128, 64, 8, 6, 2),
    ("triton-n128-w16-s3", "triton", 128, 128, 16, 3, 0),
    ("triton-n64-w8-s4", "triton", 128, 64, 8, 4, 0),
    ("gluon-ws-n128-s4", "gluon-ws", 128, 128, 8, 4, 0),     # warps: the default partition's (+ 4 producer)
    ("gluon-ws-n128-s3", "gluon-ws", 128, 128, 8, 3, 0),
]


def _layouts(bm: int, bn: int):
    return (gl.NVMMASharedLayout.get_default_for([bm, 128], gl.float8e4nv),
            gl.NVMMASharedLayout.get_default_for([bn, 128], gl.float8e4nv))


def aot(K: int = 7168) -> list:
    """sm_90a compile on the CPU: registers, spills, shared memory, wgmma waits, code size."""
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.experimental.gluon._runtime import GluonASTSource

    ptxas = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "ptxas")
    out = []
    for name, kind, bm, bn, warps, stages, group in VARIANTS:
        la, lb = _layouts(bm, bn)
        base = dict(a_scale_ptr="*fp32", w_scale_ptr="*fp32", c_ptr="*bf16", M="i32", I="i32", K="i32")
        if kind == "gluon":
            sig = dict(a_desc=f"tensordesc<fp8e4nv[{bm},128],{la!r}>", w_desc=f"tensordesc<fp8e4nv[{bn},128],{lb!r}>",
                       **base)
            const = dict(BLOCK_M=bm, BLOCK_N=bn, NUM_STAGES=stages, GROUP=group, num_warps=warps)
            source, fn = GluonASTSource, swiglu_gemm1_gluon
        elif kind == "gluon-ws":
            sig = dict(a_desc=f"tensordesc<fp8e4nv[{bm},128],{la!r}>", w_desc=f"tensordesc<fp8e4nv[{bn},128],{lb!r}>",
                       **base)
            const = dict(BLOCK_M=bm, BLOCK_N=bn, NUM_STAGES=stages, PRODUCER_REGS=WS_PRODUCER_REGS, num_warps=warps)
            source, fn = GluonASTSource, swiglu_gemm1_gluon_ws
        else:
            sig = dict(a_desc=f"tensordesc<fp8e4nv[{bm},128]>", w_desc=f"tensordesc<fp8e4nv[{bn},128]>", **base)
            const = dict(BLOCK_M=bm, BLOCK_N=bn)
            source, fn = ASTSource, swiglu_gemm1_triton
        sig.update({k: "constexpr" for k in const})
        attrs = {(i,): [["tt.divisibility", 16]] for i, v in enumerate(sig.values()) if v.startswith("*")}
        try:
            k = triton.compile(source(fn=fn, signature=sig, constexprs=const, attrs=attrs),
                               target=GPUTarget("cuda", 90, 32),
                               options=dict(num_warps=warps, num_stages=stages,
                                            **({"maxnreg": WS_MAXNREG} if kind == "gluon-ws" else {})))
        except Exception as exc:
            print(f"{name:<20} compile failed: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}", flush=True)
            out.append(dict(variant=name, error=str(exc).splitlines()[0][:300]))
            continue
        ptx = k.asm["ptx"]
        path = f"/tmp/swiglu_{name}.ptx"
        with open(path, "w") as fh:
            fh.write(ptx)
        cubin = path[:-4] + ".cubin"
        r = subprocess.run([ptxas, "-arch=sm_90a", "-v", path, "-o", cubin], capture_output=True, text=True)
        regs = re.findall(r"Used (\d+) registers", r.stderr)
        spill = re.findall(r"(\d+) bytes spill stores", r.stderr)
        waits = "".join(re.findall(r"wgmma.wait_group.sync.aligned (\d+)", ptx))
        maxnreg = re.findall(r"setmaxnreg\.(inc|dec)\.sync\.aligned\.u32\s+(\d+)", ptx)
        notes = [ln.split("info    :")[-1].strip()[:90] for ln in r.stderr.splitlines() if "(C75" in ln]
        size = os.path.getsize(cubin) if os.path.exists(cubin) else 0
        row = dict(variant=name, smem=k.metadata.shared, regs=int(regs[0]) if regs else None,
                   spill=int(spill[0]) if spill else None, waits=waits, cubin=size, notes=notes,
                   setmaxnreg=[f"{a} {n}" for a, n in maxnreg])
        out.append(row)
        print(json.dumps(row), flush=True)
    return out


def gpu(shapes, json_path=None) -> None:
    """Correctness against torch (relative max error of C) and time (triton.testing.do_bench)."""
    import torch
    from triton.experimental.gluon.nvidia.hopper import TensorDescriptor as GluonDescriptor
    from triton.tools.tensor_descriptor import TensorDescriptor

    torch.manual_seed(0)
    dev = torch.device("cuda")
    rows_out = []
    for M, I, K in shapes:
        a = (torch.randn(M, K, device=dev) * 0.5).to(torch.float8_e4m3fn)
        w = (torch.randn(2 * I, K, device=dev) * 0.5).to(torch.float8_e4m3fn)
        a_scale = torch.rand(K // 128, M, device=dev) * 0.02 + 0.01
        w_scale = torch.rand(2 * I // 128, K // 128, device=dev) * 0.02 + 0.01
        g = ((a.float() * a_scale.T.repeat_interleave(128, 1))
             @ (w.float() * w_scale.repeat_interleave(128, 0).repeat_interleave(128, 1)).T)
        ref = torch.nn.functional.silu(g[:, I:]) * g[:, :I]
        for name, kind, bm, bn, warps, stages, group in VARIANTS:
            c = torch.empty(M, I, device=dev, dtype=torch.bfloat16)
            grid = (triton.cdiv(M, bm), I // bn)
            if kind in ("gluon", "gluon-ws"):
                la, lb = _layouts(bm, bn)
                ad = GluonDescriptor(a, list(a.shape), list(a.stride()), [bm, 128], la)
                wd = GluonDescriptor(w, list(w.shape), list(w.stride()), [bn, 128], lb)
                if kind == "gluon":
                    def fn(ad=ad, wd=wd, c=c, grid=grid, bm=bm, bn=bn, stages=stages, group=group, warps=warps):
                        swiglu_gemm1_gluon[grid](ad, wd, a_scale, w_scale, c, M, I, K, BLOCK_M=bm, BLOCK_N=bn,
                                                 NUM_STAGES=stages, GROUP=group, num_warps=warps)
                else:
                    def fn(ad=ad, wd=wd, c=c, grid=grid, bm=bm, bn=bn, stages=stages, warps=warps):
                        swiglu_gemm1_gluon_ws[grid](ad, wd, a_scale, w_scale, c, M, I, K, BLOCK_M=bm, BLOCK_N=bn,
                                                    NUM_STAGES=stages, PRODUCER_REGS=WS_PRODUCER_REGS,
                                                    num_warps=warps, maxnreg=WS_MAXNREG)
            else:
                ad, wd = TensorDescriptor.from_tensor(a, [bm, 128]), TensorDescriptor.from_tensor(w, [bn, 128])

                def fn(ad=ad, wd=wd, c=c, grid=grid, bm=bm, bn=bn, stages=stages, warps=warps):
                    swiglu_gemm1_triton[grid](ad, wd, a_scale, w_scale, c, M, I, K, BLOCK_M=bm, BLOCK_N=bn,
                                              num_warps=warps, num_stages=stages)
            try:
                fn()
                torch.cuda.synchronize()
            except Exception as exc:
                print(f"M={M} I={I} K={K} {name:<20} failed: {type(exc).__name__}: {str(exc)[:200]}", flush=True)
                continue
            err = ((c.float() - ref).abs().max() / ref.abs().max()).item()
            ms = triton.testing.do_bench(fn, warmup=10, rep=100)
            tflops = 2 * M * 2 * I * K / (ms * 1e-3) / 1e12
            rows_out.append(dict(M=M, I=I, K=K, variant=name, rel_max_err=err, us=ms * 1e3, tflops=tflops))
            print(f"M={M} I={I} K={K} {name:<20} rel.max.err {err:.2e}  {ms * 1e3:8.1f} µs  {tflops:6.0f} TFLOP/s",
                  flush=True)
    if json_path:
        with open(json_path, "w") as fh:
            json.dump(rows_out, fh, indent=1)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--aot", action="store_true", help="compile for sm_90a on the CPU (no GPU needed)")
    ap.add_argument("--shapes", default="8192x2048x7168,16384x2048x7168",
                    help="MxIxK list: M rows, I = GEMM1's output width (W13 has 2I rows), K = hidden size")
    ap.add_argument("--json", default=None, help="write the rows (AOT or GPU) here")
    args = ap.parse_args()
    if args.aot:
        rows = aot()
        if args.json:
            with open(args.json, "w") as fh:
                json.dump(rows, fh, indent=1)
    else:
        if not os.environ.get("CUDA_VISIBLE_DEVICES", "x"):
            sys.exit("no GPU: run with --aot")
        gpu([tuple(int(v) for v in s.split("x")) for s in args.shapes.split(",")], args.json)
