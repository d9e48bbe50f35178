"""The two grouped FP8 GEMMs with tensor-memory-accelerator (TMA) loads: the mid/prefill
alternative to gemm.py, selected by the config key ``TMA`` (kernel._forward).

Why: at T >= 512 the pointer-gather GEMMs of gemm.py stream weights at 50-60 % of HBM speed and
reach about 35 % of the FP8 rate at prefill (docs/history/moe.md).  TMA moves whole tiles
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

Persistent tile loop (config key PERSIST = programs per SM, kernel._gemms_tma): the grids of
gemm.py are upper bounds from shapes (MB = max_m_blocks(T)), and at prefill most of their
programs find an unused M-block and exit (T = 14107, BLOCK_M 128: 1055 bounded M-blocks against
about 140 used; GEMM2 then launches 59k programs for 8k tiles).  With PERSIST > 0 each kernel
launches at most PERSIST * SMs programs, reads the used M-block count from the expert counts
(``_used_m_blocks``) and strides over the used tiles only.  PERSIST = 0: one program per
bounded tile, as before.

The descriptors are built on the host (``triton.tools.tensor_descriptor.TensorDescriptor``), so
no device-side allocator is needed; inside a CUDA graph capture they are baked with the
pointers, which the caller's graph key already holds.  Padding rows of C are never written by
GEMM1 and are read here as they are: rows of a product are independent, and GEMM2 stores only
valid rows.
"""

import triton
import triton.language as tl

from .gemm import _block_rows, _promote_w2, _swiglu_quant_store, _tile_of, _used_m_blocks


@triton.jit(do_not_specialize=["T", "R"])
def _gather_rows_kernel(a_ptr, a_scale_ptr, sorted_ptr, block_expert_ptr, block_rows_ptr, counts_ptr, out_ptr,
                        out_scale_ptr, T, R,
                        H: tl.constexpr, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr,
                        NUM_LOCAL: tl.constexpr, NUM_LOCAL_P2: tl.constexpr, PERSIST: tl.constexpr,
                        SCALE_OUT: tl.constexpr):
    """out[row, h-chunk] = a[token(row), h-chunk]; zero rows past the block's valid rows.
    SCALE_OUT (config key A_SCALE_SORTED): also out_scale [H/128, R] fp32 = a_scale [H/128, T]
    at each row's token (0 in padding rows), so GEMM1 reads its activation scales contiguously
    instead of one scattered 4-byte load per row and K block.
    Grid (programs, H / BLOCK_H): M-block pid (PERSIST = 0; unused M-blocks exit) or every used
    M-block with the grid's stride."""
    offs_h = tl.program_id(1) * BLOCK_H + tl.arange(0, BLOCK_H)
    if PERSIST:
        used = _used_m_blocks(counts_ptr, NUM_LOCAL, NUM_LOCAL_P2, BLOCK_M)
        pid_m = tl.program_id(0)
        while pid_m < used:        # (a while loop: the interpreter cannot range() over tensors)
            _gather_block(a_ptr, a_scale_ptr, sorted_ptr, block_rows_ptr, out_ptr, out_scale_ptr, T, R, pid_m,
                          offs_h, H, TOP_K, BLOCK_M, BLOCK_H, SCALE_OUT)
            pid_m += tl.num_programs(0)
    elif tl.load(block_expert_ptr + tl.program_id(0)) >= 0:
        _gather_block(a_ptr, a_scale_ptr, sorted_ptr, block_rows_ptr, out_ptr, out_scale_ptr, T, R,
                      tl.program_id(0), offs_h, H, TOP_K, BLOCK_M, BLOCK_H, SCALE_OUT)


@triton.jit
def _gather_block(a_ptr, a_scale_ptr, sorted_ptr, block_rows_ptr, out_ptr, out_scale_ptr, T, R, pid_m, offs_h,
                  H: tl.constexpr, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_H: tl.constexpr,
                  SCALE_OUT: tl.constexpr):
    rows, row_ok = _block_rows(pid_m, block_rows_ptr, BLOCK_M, 1)
    tok = tl.load(sorted_ptr + rows, mask=row_ok, other=0) // TOP_K
    x = tl.load(a_ptr + tok.to(tl.int64)[:, None] * H + offs_h[None, :], mask=row_ok[:, None], other=0.0)
    tl.store(out_ptr + rows.to(tl.int64)[:, None] * H + offs_h[None, :], x)
    if SCALE_OUT:
        kbs = tl.program_id(1) * (BLOCK_H // 128) + tl.arange(0, BLOCK_H // 128)
        s = tl.load(a_scale_ptr + kbs[:, None] * T + tok[None, :], mask=row_ok[None, :], other=0.0)
        tl.store(out_scale_ptr + kbs[:, None] * R + rows[None, :], s)


@triton.jit(do_not_specialize=["T", "R"])
def _gemm1_tma_kernel(
    a_desc, a_scale_ptr, w_desc, w_scale_ptr, sorted_ptr, block_expert_ptr, block_rows_ptr,
    counts_ptr, c_ptr, c_scale_ptr,
    T, R,
    H: tl.constexpr, I: tl.constexpr, TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SCALE_BLK: tl.constexpr, FP8_MAX_C: tl.constexpr,
    GROUP_M: tl.constexpr, NUM_LOCAL: tl.constexpr, NUM_LOCAL_P2: tl.constexpr, PERSIST: tl.constexpr,
    A_SCALE_SORTED: tl.constexpr,
):
    """C = silu(A W13[e, I:]^T) * (A W13[e, :I]^T), FP8 per row per BLOCK_N columns.
    a_desc: A_sorted [R, H] fp8, block [BLOCK_M, 128]; w_desc: W13 as [E*2I, H] fp8, block
    [BLOCK_N, 128]; a_scale [H/128, T] fp32 read at each row's token, or (A_SCALE_SORTED) the
    gather's [H/128, R] read at the row; w_scale [E, 2I/128, H/128]; counts [NUM_LOCAL] int32
    (the used M-blocks, PERSIST)."""
    NUM_N: tl.constexpr = I // BLOCK_N
    if PERSIST:
        used = _used_m_blocks(counts_ptr, NUM_LOCAL, NUM_LOCAL_P2, BLOCK_M)
        tile = tl.program_id(0)
        while tile < used * NUM_N:
            pid_m, pid_n = _tile_of(tile, used * BLOCK_M, NUM_N, BLOCK_M, GROUP_M)
            _gemm1_tile(a_desc, a_scale_ptr, w_desc, w_scale_ptr, sorted_ptr, block_rows_ptr, c_ptr,
                        c_scale_ptr, T, R, pid_m, pid_n, tl.load(block_expert_ptr + pid_m), H, I, TOP_K,
                        BLOCK_M, BLOCK_N, SCALE_BLK, FP8_MAX_C, A_SCALE_SORTED)
            tile += tl.num_programs(0)
    else:
        pid_m, pid_n = _tile_of(tl.program_id(0), R, NUM_N, BLOCK_M, GROUP_M)
        expert = tl.load(block_expert_ptr + pid_m)
        if expert >= 0:
            _gemm1_tile(a_desc, a_scale_ptr, w_desc, w_scale_ptr, sorted_ptr, block_rows_ptr, c_ptr,
                        c_scale_ptr, T, R, pid_m, pid_n, expert, H, I, TOP_K, BLOCK_M, BLOCK_N, SCALE_BLK,
                        FP8_MAX_C, A_SCALE_SORTED)


@triton.jit
def _gemm1_tile(a_desc, a_scale_ptr, w_desc, w_scale_ptr, sorted_ptr, block_rows_ptr, c_ptr, c_scale_ptr,
                T, R, pid_m, pid_n, expert,
                H: tl.constexpr, I: tl.constexpr, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, SCALE_BLK: tl.constexpr, FP8_MAX_C: tl.constexpr,
                A_SCALE_SORTED: tl.constexpr):
    """One (M-block, N-block) tile of GEMM1 with its SwiGLU/FP8 epilogue."""
    rows, row_ok = _block_rows(pid_m, block_rows_ptr, BLOCK_M, 1)
    tok = tl.where(row_ok, tl.load(sorted_ptr + rows, mask=row_ok, other=0) // TOP_K, 0)
    n_up = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    KB: tl.constexpr = H // SCALE_BLK
    ws_base = w_scale_ptr + expert * ((2 * I // SCALE_BLK) * KB)
    su_ptr = ws_base + ((pid_n * BLOCK_N) // SCALE_BLK) * KB
    sg_ptr = ws_base + ((I + pid_n * BLOCK_N) // SCALE_BLK) * KB
    if A_SCALE_SORTED:
        as_ptrs = a_scale_ptr + rows
        as_stride = R
    else:
        as_ptrs = a_scale_ptr + tok
        as_stride = T
    m0 = pid_m * BLOCK_M
    up0 = expert * (2 * I) + pid_n * BLOCK_N
    acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for kb in range(0, KB):
        a = a_desc.load([m0, kb * SCALE_BLK])
        wu = w_desc.load([up0, kb * SCALE_BLK])
        wg = w_desc.load([up0 + I, kb * SCALE_BLK])
        a_s = tl.load(as_ptrs + kb * as_stride)
        acc_u += tl.dot(a, wu.T) * (a_s[:, None] * tl.load(su_ptr + kb))
        acc_g += tl.dot(a, wg.T) * (a_s[:, None] * tl.load(sg_ptr + kb))
    _swiglu_quant_store(acc_u, acc_g, rows, row_ok, n_up, pid_n, R, c_ptr, c_scale_ptr, I, FP8_MAX_C)


@triton.jit(do_not_specialize=["R"])
def _gemm2_tma_kernel(
    c_desc, c_scale_ptr, w_desc, w_scale_ptr, block_expert_ptr, block_rows_ptr, counts_ptr, y_ptr,
    R,
    H: tl.constexpr, I: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, QG: tl.constexpr, SCALE_BLK: tl.constexpr,
    GROUP_M: tl.constexpr, NUM_LOCAL: tl.constexpr, NUM_LOCAL_P2: tl.constexpr, PERSIST: tl.constexpr,
    SUB: tl.constexpr,
):
    """O = C W2[e]^T as bf16 rows of y [R, H] at the valid rows.  c_desc: C [R, I] fp8, block
    [BLOCK_M, QG]; w_desc: W2 as [E*H, I] fp8, block [BLOCK_N, QG]; c_scale [I/QG, R];
    w_scale [E, H/128, I/128]; counts [NUM_LOCAL] int32 (PERSIST).  One dot per C quantisation
    group (QG columns of K).  SUB (config key G2_SPLIT_M): each M-block of the align is split
    into SUB row blocks of BLOCK_M rows (a 64-row tile on one warpgroup keeps two programs per
    SM, whose promotions and MMAs interleave); SUB = 1: BLOCK_M is the M-block.  (Skipping a
    row block without a valid row, the empty half of an expert's last M-block, is 2-5 % slower at
    T = 4096-14107: docs/history/moe.md.)"""
    NUM_N: tl.constexpr = H // BLOCK_N
    if PERSIST:
        used = _used_m_blocks(counts_ptr, NUM_LOCAL, NUM_LOCAL_P2, BLOCK_M * SUB) * SUB
        tile = tl.program_id(0)
        while tile < used * NUM_N:
            pid_m, pid_n = _tile_of(tile, used * BLOCK_M, NUM_N, BLOCK_M, GROUP_M)
            _gemm2_tile(c_desc, c_scale_ptr, w_desc, w_scale_ptr, block_rows_ptr, y_ptr, R, pid_m, pid_n,
                        tl.load(block_expert_ptr + pid_m // SUB), H, I, BLOCK_M, BLOCK_N, QG, SCALE_BLK, SUB)
            tile += tl.num_programs(0)
    else:
        pid_m, pid_n = _tile_of(tl.program_id(0), R, NUM_N, BLOCK_M, GROUP_M)
        expert = tl.load(block_expert_ptr + pid_m // SUB)
        if expert >= 0:
            _gemm2_tile(c_desc, c_scale_ptr, w_desc, w_scale_ptr, block_rows_ptr, y_ptr, R, pid_m, pid_n,
                        expert, H, I, BLOCK_M, BLOCK_N, QG, SCALE_BLK, SUB)


@triton.jit
def _gemm2_tile(c_desc, c_scale_ptr, w_desc, w_scale_ptr, block_rows_ptr, y_ptr, R, pid_m, pid_n, expert,
                H: tl.constexpr, I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                QG: tl.constexpr, SCALE_BLK: tl.constexpr, SUB: tl.constexpr):
    """One (row block, N-block) tile of GEMM2, stored as bf16 rows of y."""
    rows, row_ok = _block_rows(pid_m, block_rows_ptr, BLOCK_M, SUB)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    KB: tl.constexpr = I // SCALE_BLK
    ws_base = w_scale_ptr + expert * ((H // SCALE_BLK) * KB)
    cs_ptrs = c_scale_ptr + rows
    m0 = pid_m * BLOCK_M
    n0 = expert * H + pid_n * BLOCK_N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for kq in range(0, I // QG):
        c = c_desc.load([m0, kq * QG])
        w = w_desc.load([n0, kq * QG])
        c_s = tl.load(cs_ptrs + kq * R, mask=row_ok, other=0.0)
        acc = _promote_w2(acc, tl.dot(c, w.T), c_s, ws_base, pid_n, offs_n, kq, KB, BLOCK_N, QG, SCALE_BLK)
    y_ptrs = y_ptr + rows.to(tl.int64)[:, None] * H + offs_n[None, :]
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None])
