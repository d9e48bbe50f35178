"""The two grouped FP8 GEMMs and the per-token reduce.

GEMM1  (one program per (M-block, N-block of I), times SPLIT_K):  up = A W13[e, :I]^T,
       gate = A W13[e, I:]^T, both FP8 dots in the same K loop with 128-block scale promotion in
       fp32; epilogue C = silu(gate) * up, re-quantised to FP8 per row per BLOCK_N columns
       (BLOCK_N = the C quantisation group QG, so each tile row is exactly one group).  With
       SPLIT_K > 1 each program covers 1/SPLIT_K of H and a second kernel sums the fp32 partials
       and runs the epilogue.
GEMM2  (one program per (M-block, N-block of H)):  O = C W2[e]^T with QG-block C scales and
       128x128 W2 scales, written as bf16 rows at the pair's padded row.
reduce (one program per (token, H-block)): out[t] = sum_k w[t,k] * O[row(t,k)] over the
       token's local pairs in top-k order, fp32, cast to bf16; 0 where no local pair.

H and I are constexpr: the definition fixes them (they never vary between workloads), and
constant trip counts and strides help the compiler.  Per-workload sizes (T, R) stay runtime
arguments.  M-blocks come from the align kernel's table: block_expert[b] (-1: unused, the
program exits at once) and block_rows[b] (valid rows; the rest of the block is padding).
"""

import triton
import triton.language as tl

SCALE_BLOCK = 128  # FP8 block-scale granularity of the operands (1x128 activations, 128x128 W)
FP8_MAX = 448.0


@triton.jit
def _tile_of(pid, R, NUM_N: tl.constexpr, BLOCK_M: tl.constexpr, GROUP_M: tl.constexpr):
    """program id -> (M-block, N-block).  GROUP_M = 1: N fastest (one M-block's tiles are
    consecutive); GROUP_M > 1: groups of GROUP_M M-blocks sweep N together, M fastest inside a
    group, so the M-blocks of one expert share each weight tile through L2."""
    if GROUP_M == 1:
        pid_m = pid // NUM_N
        pid_n = pid % NUM_N
    else:
        width = GROUP_M * NUM_N
        first_m = (pid // width) * GROUP_M
        gsize = tl.minimum(R // BLOCK_M - first_m, GROUP_M)
        pid_m = first_m + (pid % width) % gsize
        pid_n = (pid % width) // gsize
    return pid_m, pid_n


@triton.jit
def _promote_w2(acc, prod, c_s, ws_base, pid_n, offs_n, kq, KB: tl.constexpr, BLOCK_N: tl.constexpr,
                QG: tl.constexpr, SCALE_BLK: tl.constexpr):
    """acc + prod * c_s[row] * w_scale[column block, K block of group kq]: GEMM2's fp32 promotion.
    prod [BLOCK_M, BLOCK_N] fp32; c_s [BLOCK_M]; ws_base: W2's scales of the expert [H/128, I/128].
    A tile no wider than one 128-column scale block has one weight scale per K block: a scalar,
    so the promotion is one FFMA per element (a per-column vector costs an outer product more)."""
    kb = (kq * QG) // SCALE_BLK
    if BLOCK_N <= SCALE_BLK:
        return acc + prod * (c_s * tl.load(ws_base + ((pid_n * BLOCK_N) // SCALE_BLK) * KB + kb))[:, None]
    else:
        return acc + prod * (c_s[:, None] * tl.load(ws_base + (offs_n // SCALE_BLK) * KB + kb)[None, :])


@triton.jit
def _block_rows(pid_m, block_rows_ptr, BLOCK_M: tl.constexpr, SUB: tl.constexpr):
    """(the padded rows of row block pid_m, the mask of its valid rows: the rest is padding).
    A row block is 1/SUB of an M-block (BLOCK_M = the M-block's rows / SUB): SUB = 1 everywhere
    except the TMA GEMM2 with config key G2_SPLIT_M."""
    offs_m = tl.arange(0, BLOCK_M)
    return pid_m * BLOCK_M + offs_m, (pid_m % SUB) * BLOCK_M + offs_m < tl.load(block_rows_ptr + pid_m // SUB)


@triton.jit
def _used_m_blocks(counts_ptr, NUM_LOCAL: tl.constexpr, NUM_LOCAL_P2: tl.constexpr, BLOCK_M: tl.constexpr):
    """The M-blocks the align kernel fills (they come first): sum over experts of
    ceil(count / BLOCK_M), from the expert counts [NUM_LOCAL] int32.  Persistent kernels
    (PERSIST) stride over these blocks' tiles only."""
    e = tl.arange(0, NUM_LOCAL_P2)
    cnt = tl.load(counts_ptr + e, mask=e < NUM_LOCAL, other=0)
    return tl.sum((cnt + BLOCK_M - 1) // BLOCK_M, axis=0)


@triton.jit
def _swiglu_quant_store(acc_u, acc_g, rows, row_ok, n_up, pid_n, R, c_ptr, c_scale_ptr,
                        I: tl.constexpr, FP8_MAX_C: tl.constexpr):
    """GEMM1's epilogue: C = silu(gate) * up (the SECOND half is the gate), re-quantised to FP8
    per row per tile (one QG group), stored at the padded rows with its scales [I/QG, R]."""
    c = acc_g / (1.0 + tl.exp(-acc_g)) * acc_u
    amax = tl.max(tl.abs(c), axis=1)
    scale = tl.where(amax > 0.0, amax / FP8_MAX_C, 1.0)
    q = tl.minimum(tl.maximum(c / scale[:, None], -FP8_MAX_C), FP8_MAX_C)
    # Round to the e4m3 grid (3 mantissa bits, nearest-even) in integer arithmetic, so the cast
    # below is exact both on the GPU (cvt.rn.satfinite) and in the Triton interpreter (whose
    # fp32->fp8 cast truncates and can mis-carry into the exponent).  |q| <= 448 stays <= 448.
    bits = q.to(tl.int32, bitcast=True)
    bits = (bits + (0x7FFFF + ((bits >> 20) & 1))) & -1048576   # -1048576 = ~0xFFFFF
    q = bits.to(tl.float32, bitcast=True)
    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * I + n_up[None, :]
    tl.store(c_ptrs, q.to(c_ptr.dtype.element_ty), mask=row_ok[:, None])
    tl.store(c_scale_ptr + pid_n * R + rows, scale, mask=row_ok)   # [I/BLOCK_N, R]


@triton.jit(do_not_specialize=["T", "R"])
def _gemm1_kernel(
    a_ptr, a_scale_ptr, w_ptr, w_scale_ptr, sorted_ptr, block_expert_ptr, block_rows_ptr,
    c_ptr, c_scale_ptr, part_ptr, counts_ptr,
    T, R,
    H: tl.constexpr, I: tl.constexpr, TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    SCALE_BLK: tl.constexpr, FP8_MAX_C: tl.constexpr, GROUP_M: tl.constexpr,
    SPLIT_K: tl.constexpr, NUM_LOCAL: tl.constexpr, NUM_LOCAL_P2: tl.constexpr, PERSIST: tl.constexpr,
):
    """SPLIT_K = 1: the whole K loop and the SwiGLU/FP8 epilogue.  SPLIT_K > 1 (decode, when one
    or two active experts cannot fill the SMs): work item tile*SPLIT_K + j runs the j-th 1/SPLIT_K
    of H and stores its fp32 up/gate partials to part [SPLIT_K, R, 2I]; _gemm1_splitk_epilogue
    sums them in a fixed order (deterministic) and applies the same epilogue.  PERSIST = False:
    one program per bounded work item (unused M-blocks exit); True: the programs stride over the
    used M-blocks' work items (counts [NUM_LOCAL] int32)."""
    NUM_N: tl.constexpr = I // BLOCK_N
    if PERSIST:
        used = _used_m_blocks(counts_ptr, NUM_LOCAL, NUM_LOCAL_P2, BLOCK_M)
        item = tl.program_id(0)
        while item < used * NUM_N * SPLIT_K:     # (a while loop: the interpreter cannot range() over tensors)
            pid_m, pid_n = _tile_of(item // SPLIT_K, used * BLOCK_M, NUM_N, BLOCK_M, GROUP_M)
            _gemm1_tile(a_ptr, a_scale_ptr, w_ptr, w_scale_ptr, sorted_ptr, block_rows_ptr, c_ptr, c_scale_ptr,
                        part_ptr, T, R, pid_m, pid_n, item % SPLIT_K, tl.load(block_expert_ptr + pid_m),
                        H, I, TOP_K, BLOCK_M, BLOCK_N, BLOCK_K, SCALE_BLK, FP8_MAX_C, SPLIT_K)
            item += tl.num_programs(0)
    else:
        pid = tl.program_id(0)
        pid_m, pid_n = _tile_of(pid // SPLIT_K, R, NUM_N, BLOCK_M, GROUP_M)
        expert = tl.load(block_expert_ptr + pid_m)
        if expert >= 0:                 # K slices of one tile are adjacent programs (A in L2)
            _gemm1_tile(a_ptr, a_scale_ptr, w_ptr, w_scale_ptr, sorted_ptr, block_rows_ptr, c_ptr, c_scale_ptr,
                        part_ptr, T, R, pid_m, pid_n, pid % SPLIT_K, expert,
                        H, I, TOP_K, BLOCK_M, BLOCK_N, BLOCK_K, SCALE_BLK, FP8_MAX_C, SPLIT_K)


@triton.jit
def _gemm1_tile(a_ptr, a_scale_ptr, w_ptr, w_scale_ptr, sorted_ptr, block_rows_ptr, c_ptr, c_scale_ptr,
                part_ptr, T, R, pid_m, pid_n, pid_k, expert,
                H: tl.constexpr, I: tl.constexpr, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, SCALE_BLK: tl.constexpr,
                FP8_MAX_C: tl.constexpr, SPLIT_K: tl.constexpr):
    """K slice pid_k of the (M-block, N-block) tile: the dots, then the epilogue or the partials."""
    rows, row_ok = _block_rows(pid_m, block_rows_ptr, BLOCK_M, 1)     # padded rows of this block

    offs_n = tl.arange(0, BLOCK_N)
    # each K step of BLOCK_K runs NSUB dots of KS = min(BLOCK_K, 128) columns, one scale each
    KS: tl.constexpr = BLOCK_K if BLOCK_K < SCALE_BLK else SCALE_BLK
    NSUB: tl.constexpr = BLOCK_K // KS
    offs_k = tl.arange(0, KS)
    pair = tl.load(sorted_ptr + rows, mask=row_ok, other=0)
    tok = tl.where(row_ok, pair // TOP_K, 0)                # padding rows read token 0 (discarded)

    a_ptrs = a_ptr + tok.to(tl.int64)[:, None] * H + offs_k[None, :]
    n_up = pid_n * BLOCK_N + offs_n                           # rows of W13 (up half)
    wu_ptrs = (w_ptr + expert.to(tl.int64) * (2 * I * H)
               + n_up.to(tl.int64)[None, :] * H + offs_k[:, None])
    wg_ptrs = wu_ptrs + I * H                                 # gate half: rows I + n_up
    KB: tl.constexpr = H // SCALE_BLK
    ws_base = w_scale_ptr + expert * ((2 * I // SCALE_BLK) * KB)
    su_ptr = ws_base + ((pid_n * BLOCK_N) // SCALE_BLK) * KB
    sg_ptr = ws_base + ((I + pid_n * BLOCK_N) // SCALE_BLK) * KB
    as_ptrs = a_scale_ptr + tok                               # [H/128, T]: + kb * T

    K_STEPS: tl.constexpr = H // BLOCK_K // SPLIT_K
    k0 = pid_k * (K_STEPS * BLOCK_K)                          # first column of this K slice
    a_ptrs += k0
    wu_ptrs += k0
    wg_ptrs += k0

    acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, K_STEPS):
        for s in tl.static_range(NSUB):
            kb = (k0 + k * BLOCK_K + s * KS) // SCALE_BLK
            a = tl.load(a_ptrs + s * KS)
            a_s = tl.load(as_ptrs + kb * T)
            wu = tl.load(wu_ptrs + s * KS)
            wg = tl.load(wg_ptrs + s * KS)
            s_u = tl.load(su_ptr + kb)
            s_g = tl.load(sg_ptr + kb)
            acc_u += tl.dot(a, wu) * (a_s[:, None] * s_u)
            acc_g += tl.dot(a, wg) * (a_s[:, None] * s_g)
        a_ptrs += BLOCK_K
        wu_ptrs += BLOCK_K
        wg_ptrs += BLOCK_K

    if SPLIT_K == 1:
        _swiglu_quant_store(acc_u, acc_g, rows, row_ok, n_up, pid_n, R, c_ptr, c_scale_ptr,
                            I, FP8_MAX_C)
    else:
        p_ptrs = part_ptr + (pid_k * R + rows).to(tl.int64)[:, None] * (2 * I) + n_up[None, :]
        tl.store(p_ptrs, acc_u, mask=row_ok[:, None])
        tl.store(p_ptrs + I, acc_g, mask=row_ok[:, None])


@triton.jit(do_not_specialize=["R"])
def _gemm1_splitk_epilogue(
    part_ptr, block_expert_ptr, block_rows_ptr, c_ptr, c_scale_ptr,
    R,
    I: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, SPLIT_K: tl.constexpr,
    FP8_MAX_C: tl.constexpr,
):
    """Sums GEMM1's SPLIT_K fp32 partials (slice order: deterministic) for one (M-block, N-block)
    tile and applies the SwiGLU/FP8 epilogue; grid MB * (I / BLOCK_N), unused blocks exit."""
    pid_m, pid_n = _tile_of(tl.program_id(0), R, I // BLOCK_N, BLOCK_M, 1)
    if tl.load(block_expert_ptr + pid_m) < 0:
        return
    rows, row_ok = _block_rows(pid_m, block_rows_ptr, BLOCK_M, 1)
    n_up = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc_u = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    acc_g = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for j in tl.static_range(SPLIT_K):
        p_ptrs = part_ptr + (j * R + rows).to(tl.int64)[:, None] * (2 * I) + n_up[None, :]
        acc_u += tl.load(p_ptrs, mask=row_ok[:, None], other=0.0)
        acc_g += tl.load(p_ptrs + I, mask=row_ok[:, None], other=0.0)
    _swiglu_quant_store(acc_u, acc_g, rows, row_ok, n_up, pid_n, R, c_ptr, c_scale_ptr,
                        I, FP8_MAX_C)


@triton.jit(do_not_specialize=["R"])
def _gemm2_kernel(
    c_ptr, c_scale_ptr, w_ptr, w_scale_ptr, block_expert_ptr, block_rows_ptr, y_ptr,
    sorted_ptr, weights_ptr, out_ptr,
    counts_ptr, R,
    H: tl.constexpr, I: tl.constexpr, TOP_K: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, QG: tl.constexpr,
    SCALE_BLK: tl.constexpr, GROUP_M: tl.constexpr, COMBINE: tl.constexpr,
    NUM_LOCAL: tl.constexpr, NUM_LOCAL_P2: tl.constexpr, PERSIST: tl.constexpr,
):
    """O = C W2[e]^T.  BLOCK_K is a multiple of QG (GEMM1's BLOCK_N, the C quantisation
    group): each K step runs BLOCK_K/QG dots, one C scale each.
    COMBINE = False: O -> bf16 rows of y at the padded rows (the reduce kernel sums them).
    COMBINE = True: the top-k reduction fused here: out[token] += w[pair] * O with bf16
    atomics (out zeroed by the routing kernel); y is unused.  PERSIST as in _gemm1_kernel."""
    NUM_N: tl.constexpr = H // BLOCK_N
    if PERSIST:
        used = _used_m_blocks(counts_ptr, NUM_LOCAL, NUM_LOCAL_P2, BLOCK_M)
        tile = tl.program_id(0)
        while tile < used * NUM_N:
            pid_m, pid_n = _tile_of(tile, used * BLOCK_M, NUM_N, BLOCK_M, GROUP_M)
            _gemm2_tile(c_ptr, c_scale_ptr, w_ptr, w_scale_ptr, block_rows_ptr, y_ptr, sorted_ptr, weights_ptr,
                        out_ptr, R, pid_m, pid_n, tl.load(block_expert_ptr + pid_m),
                        H, I, TOP_K, BLOCK_M, BLOCK_N, BLOCK_K, QG, SCALE_BLK, COMBINE)
            tile += tl.num_programs(0)
    else:
        pid_m, pid_n = _tile_of(tl.program_id(0), R, NUM_N, BLOCK_M, GROUP_M)
        expert = tl.load(block_expert_ptr + pid_m)
        if expert >= 0:
            _gemm2_tile(c_ptr, c_scale_ptr, w_ptr, w_scale_ptr, block_rows_ptr, y_ptr, sorted_ptr, weights_ptr,
                        out_ptr, R, pid_m, pid_n, expert, H, I, TOP_K, BLOCK_M, BLOCK_N, BLOCK_K, QG,
                        SCALE_BLK, COMBINE)


@triton.jit
def _gemm2_tile(c_ptr, c_scale_ptr, w_ptr, w_scale_ptr, block_rows_ptr, y_ptr, sorted_ptr, weights_ptr,
                out_ptr, R, pid_m, pid_n, expert,
                H: tl.constexpr, I: tl.constexpr, TOP_K: tl.constexpr, BLOCK_M: tl.constexpr,
                BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, QG: tl.constexpr, SCALE_BLK: tl.constexpr,
                COMBINE: tl.constexpr):
    """One (M-block, N-block) tile of GEMM2: bf16 rows of y, or (COMBINE) the weighted atomics."""
    rows, row_ok = _block_rows(pid_m, block_rows_ptr, BLOCK_M, 1)
    offs_k = tl.arange(0, QG)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)

    c_ptrs = c_ptr + rows.to(tl.int64)[:, None] * I + offs_k[None, :]
    w_ptrs = (w_ptr + expert.to(tl.int64) * (H * I)
              + offs_n.to(tl.int64)[None, :] * I + offs_k[:, None])
    KB: tl.constexpr = I // SCALE_BLK
    ws_base = w_scale_ptr + expert * ((H // SCALE_BLK) * KB)
    cs_ptrs = c_scale_ptr + rows
    NSUB: tl.constexpr = BLOCK_K // QG

    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, I // BLOCK_K):
        for s in tl.static_range(NSUB):
            kq = k * NSUB + s                                       # C quantisation group
            c = tl.load(c_ptrs + s * QG, mask=row_ok[:, None], other=0.0)  # padding: unwritten
            c_s = tl.load(cs_ptrs + kq * R, mask=row_ok, other=0.0)
            w = tl.load(w_ptrs + s * QG)
            acc = _promote_w2(acc, tl.dot(c, w), c_s, ws_base, pid_n, offs_n, kq, KB, BLOCK_N, QG, SCALE_BLK)
        c_ptrs += BLOCK_K
        w_ptrs += BLOCK_K

    if COMBINE:
        pair = tl.load(sorted_ptr + rows, mask=row_ok, other=0)
        tok = pair // TOP_K
        wgt = tl.load(weights_ptr + pair, mask=row_ok, other=0.0)
        o_ptrs = out_ptr + tok.to(tl.int64)[:, None] * H + offs_n[None, :]
        tl.atomic_add(o_ptrs, (acc * wgt[:, None]).to(out_ptr.dtype.element_ty),
                      mask=row_ok[:, None], sem="relaxed")
    else:
        y_ptrs = y_ptr + rows.to(tl.int64)[:, None] * H + offs_n[None, :]
        tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=row_ok[:, None])


@triton.jit(do_not_specialize=["T"])
def _reduce_kernel(
    y_ptr, pair_row_ptr, weights_ptr, out_ptr, T,
    H: tl.constexpr, TOP_K: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr,
):
    """out[t] = sum_k w[t,k] * y[pair_row[t,k]] over the local k, in top-k order (fp32)."""
    pid_t = tl.program_id(0)
    pid_h = tl.program_id(1)
    t = pid_t * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = t < T
    t64 = t.to(tl.int64)
    offs_h = pid_h * BLOCK_H + tl.arange(0, BLOCK_H)
    h_ok = offs_h < H
    acc = tl.zeros([BLOCK_T, BLOCK_H], dtype=tl.float32)
    for k in tl.static_range(TOP_K):
        row = tl.load(pair_row_ptr + t64 * TOP_K + k, mask=t_ok, other=-1)   # -1: not local
        w = tl.load(weights_ptr + t64 * TOP_K + k, mask=t_ok, other=0.0)
        is_loc = row >= 0
        y = tl.load(y_ptr + tl.where(is_loc, row, 0).to(tl.int64)[:, None] * H + offs_h[None, :],
                    mask=is_loc[:, None] & h_ok[None, :], other=0.0).to(tl.float32)
        acc += y * tl.where(is_loc, w, 0.0)[:, None]                # fixed order: deterministic
    tl.store(out_ptr + t64[:, None] * H + offs_h[None, :], acc.to(out_ptr.dtype.element_ty),
             mask=t_ok[:, None] & h_ok[None, :])
