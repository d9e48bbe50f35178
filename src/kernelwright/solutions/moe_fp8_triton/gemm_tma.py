"""The two grouped FP8 GEMMs with tensor-memory-accelerator (TMA) loads: the mid/prefill
alternative to gemm.py, selected by the config key ``TMA`` (kernel._forward).

Why: at T >= 512 the pointer-gather GEMMs of gemm.py stream weights at 50-60 % of HBM speed and
reach about 35 % of the FP8 rate at prefill (docs/kernels/moe.md, v4).  TMA moves whole tiles
into shared memory in the layout wgmma reads, asynchronously and without per-thread address
arithmetic, which is how Triton's own Hopper matmuls reach cuBLAS-class rates.  TMA cannot gather
rows, so GEMM1 first copies the activations into expert-sorted (padded) order:

gather   (one program per (M-block, H-chunk))  A_sorted[row] = hidden_states[token(row)] in FP8,
         zeros in padding rows; [R, H] (R = MB * BLOCK_M).
GEMM1    (one program per (M-block, N-block of I))  as gemm._gemm1_kernel (up and gate dots,
         fp32 128-block promotion, SwiGLU/FP8 epilogue) with A_sorted and W13 [E*2I, H] tiles
         through TMA descriptors; BLOCK_K = 128 (one scale block per step).
GEMM2    (one program per (M-block, N-block of H))  as gemm._gemm2_kernel without COMBINE, with C
         [R, I] (already in sorted order) and W2 [E*H, I] tiles through TMA descriptors.

The descriptors are built on the host (``triton.tools.tensor_descriptor.TensorDescriptor``), so
no device-side allocator is needed; inside a CUDA graph capture they are baked with the
pointers, which the caller's graph key already holds.  Padding rows of C are never written by
GEMM1 and are read here as they are: rows of a product are independent, and GEMM2 stores only
valid rows.
"""

import triton
import triton.language as tl

from .gemm import _block_rows, _swiglu_quant_store, _tile_of


@triton.jit
def _gather_rows_kernel(a_ptr, sorted_ptr, block_expert_ptr, block_rows_ptr, out_ptr,
                        H: tl.constexpr, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr):
    """out[row, h-chunk] = a[token(row), h-chunk]; zero rows past the block's valid rows.
    Grid (MB, H / BLOCK_H); unused M-blocks exit."""
    pid_m = tl.program_id(0)
    pid_h = tl.program_id(1)
    if tl.load(block_expert_ptr + pid_m) < 0:
        return
    rows, row_ok = _block_rows(pid_m, block_rows_ptr, BLOCK_M)
    tok = tl.load(sorted_ptr + rows, mask=row_ok, other=0) // TOP_K
    offs_h = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    x = tl.load(a_ptr + tok.to(tl.int64)[:, None] * H + offs_h[None, :], mask=row_ok[:, None], other=0.0)
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * H + offs_h[None, :], x)


@triton.jit(do_not_specialize=["T", "R"])
def _gemm1_tma_kernel(
    a_desc, a_scale_ptr, w_desc, w_scale_ptr, sorted_ptr, block_expert_ptr, block_rows_ptr,
    c_ptr, c_scale_ptr,
    T, R,
    H: tl.constexpr, I: tl.constexpr, TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SCALE_BLK: tl.constexpr, FP8_MAX_C: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """C = silu(A W13[e, I:]^T) * (A W13[e, :I]^T), FP8 per row per BLOCK_N columns.
    a_desc: A_sorted [R, H] fp8, block [BLOCK_M, 128]; w_desc: W13 as [E*2I, H] fp8, block
    [BLOCK_N, 128]; a_scale [H/128, T] fp32 (read at each row's token); w_scale [E, 2I/128, H/128]."""
    pid_m, pid_n = _tile_of(tl.program_id(0), R, I // BLOCK_N, BLOCK_M, GROUP_M)
    expert = tl.load(block_expert_ptr + pid_m)
    if expert < 0:
        return
    rows, row_ok = _block_rows(pid_m, block_rows_ptr, BLOCK_M)
    tok = tl.where(row_ok, tl.load(sorted_ptr + rows, mask=row_ok, other=0) // TOP_K, 0)
    n_up = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    KB: tl.constexpr = H // SCALE_BLK
    ws_base = w_scale_ptr + expert * ((2 * I // SCALE_BLK) * KB)
    su_ptr = ws_base + ((pid_n * BLOCK_N) // SCALE_BLK) * KB
    sg_ptr = ws_base + ((I + pid_n * BLOCK_N) // SCALE_BLK) * KB
    as_ptrs = a_scale_ptr + tok
    m0 = pid_m * BLOCK_M
    up0 = expert * (2 * I) + pid_n * BLOCK_N
    acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for kb in range(0, KB):
        a = a_desc.load([m0, kb * SCALE_BLK])
        wu = w_desc.load([up0, kb * SCALE_BLK])
        wg = w_desc.load([up0 + I, kb * SCALE_BLK])
        a_s = tl.load(as_ptrs + kb * T)
        acc_u += tl.dot(a, wu.T) * (a_s[:, None] * tl.load(su_ptr + kb))
        acc_g += tl.dot(a, wg.T) * (a_s[:, None] * tl.load(sg_ptr + kb))
    _swiglu_quant_store(acc_u, acc_g, rows, row_ok, n_up, pid_n, R, c_ptr, c_scale_ptr, I, FP8_MAX_C)


@triton.jit(do_not_specialize=["R"])
def _gemm2_tma_kernel(
    c_desc, c_scale_ptr, w_desc, w_scale_ptr, block_expert_ptr, block_rows_ptr, y_ptr,
    R,
    H: tl.constexpr, I: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, QG: tl.constexpr, SCALE_BLK: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """O = C W2[e]^T as bf16 rows of y [R, H] at the valid rows.  c_desc: C [R, I] fp8, block
    [BLOCK_M, QG]; w_desc: W2 as [E*H, I] fp8, block [BLOCK_N, QG]; c_scale [I/QG, R];
    w_scale [E, H/128, I/128].  One dot per C quantisation group (QG columns of K)."""
    pid_m, pid_n = _tile_of(tl.program_id(0), R, H // BLOCK_N, BLOCK_M, GROUP_M)
    expert = tl.load(block_expert_ptr + pid_m)
    if expert < 0:
        return
    rows, row_ok = _block_rows(pid_m, block_rows_ptr, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    KB: tl.constexpr = I // SCALE_BLK
    ws_ptrs = w_scale_ptr + expert * ((H // SCALE_BLK) * KB) + (offs_n // SCALE_BLK) * KB
    cs_ptrs = c_scale_ptr + rows
    m0 = pid_m * BLOCK_M
    n0 = expert * H + pid_n * BLOCK_N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for kq in range(0, I // QG):
        c = c_desc.load([m0, kq * QG])
        w = w_desc.load([n0, kq * QG])
        c_s = tl.load(cs_ptrs + kq * R, mask=row_ok, other=0.0)
        w_s = tl.load(ws_ptrs + (kq * QG) // SCALE_BLK)
        acc += tl.dot(c, w.T) * (c_s[:, None] * w_s[None, :])
    y_ptrs = y_ptr + rows.to(tl.int64)[:, None] * H + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None])
