"""DSA sparse MLA decode (absorbed form), split-K flash-decoding in Triton.

Definition dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64.  For each query token t and
the valid entries (id >= 0) of sparse_indices[t] (global token ids page*page_size + slot):

    logits    = (q_nope[t] Kc^T + q_pe[t] Kp^T) * sm_scale       [heads, n_valid]
    output[t] = softmax(logits) Kc                                [heads, 512]  bf16
    lse[t]    = log2(sum exp(logits))                             [heads]       fp32

A token with no valid index gets output 0 and lse -inf.

Two launches, no host synchronisation (grids come from shapes only):

  1. ``_dsa_split_kernel``, grid (T, num_splits).  Program (t, s) owns ``SPLIT`` consecutive
     slots of sparse_indices[t].  It loads q_nope[t] [H, 512] and q_pe[t] [H, 64] once, then per
     tile of BLOCK_N slots gathers the ckv rows [BLOCK_N, 512] and kpe rows [BLOCK_N, 64]
     (masked to zero where id < 0), computes the logits with bf16 tl.dot (fp32 accumulation),
     runs the online softmax in base 2 (logits pre-multiplied by sm_scale*log2(e), tl.exp2) and
     accumulates acc[H, 512] += p @ Kc, reusing the gathered ckv tile as V.  It writes the
     partial (m, l, acc) in fp32 to scratch.  A split with no valid id writes m = -inf, l = 0,
     acc = 0 (no NaN: the running max is replaced by 0 while it is still -inf).
  2. ``_dsa_combine_kernel``, grid (T, H, 512 / BLOCK_D).  Merges the splits of one
     (token, head, BLOCK_D-wide slice of the value dim, all splits loaded in one shot):
     M = max m_i, w_i = exp2(m_i - M), L = sum w_i l_i, output = sum w_i acc_i / L (bf16),
     lse = M + log2(L).  L == 0 (no valid index in the row) gives output 0 and lse -inf.

On CUDA the two launches are captured once per call signature (data pointers, shapes, strides,
dtypes of every tensor argument, sm_scale) into a CUDA graph that later calls replay: one graph
launch instead of the JIT dispatcher's host path twice (see ``run``).

The split size (slots per program) is chosen from T on the host so that T * num_splits is
about one wave of the H200's 132 SMs while keeping the fp32 partials (32 KB per split) small
next to the gathered rows (1152 B per slot).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from .launch_cache import LaunchCache, launch_record as _launch_record, signature as _sig

LOG2E = 1.4426950408889634

# Target number of split programs in kernel 1: about one wave on 132 SMs.
_TARGET_PROGRAMS = 128
_MIN_SPLIT = 32
_MAX_SPLIT = 256
# From 256-slot splits on, the 8-warp 64-slot tile runs under a 128-register cap (147 without:
# one program per SM, 12.5 % occupancy, register-limited by ncu at T = 128), so two programs
# share an SM: the split keeps growing while T * splits fills that wave of ~256 programs.
_CAPPED_REGS = 128
_CAPPED_PROGRAMS = 256
# Up to this T the capped splits take two 64-slot gather buffers instead (num_stages 3 on the
# ids-ahead loop: 165 KB of shared memory, one program per SM, no register cap) and grow until
# T * splits fits one wave of 132 SMs.
_DOUBLE_BUFFER_MAX_TOKENS = 32
_ONE_WAVE = 132
_COMBINE_BLOCK_D = None  # tests pin a value-dim slice here under the interpreter
_MAX_SPLITS = 128  # bound on splits: the combine kernel holds m/l of all splits in one vector


# Two helpers keep the interpreter (CPU tests, TRITON_INTERPRET=1) numerically faithful to the
# GPU.  With INTERPRET=False (every GPU compile) they are a plain tl.dot and a plain cast.

@triton.jit
def _dot(a, b, acc, INTERPRET: tl.constexpr):
    """acc + a @ b with fp32 accumulation.  On the GPU the bf16 operands go straight to the
    tensor cores.  The interpreter's tl.dot multiplies the raw uint16 bit patterns of bfloat16
    operands (triton-lang/triton#11584; Triton's debugging guide says to cast to fp32), so
    there they are upcast first (exact: bf16 -> fp32)."""
    if INTERPRET:
        return tl.dot(a.to(tl.float32), b.to(tl.float32), acc=acc)
    else:
        return tl.dot(a, b, acc=acc)


@triton.jit
def _to_bf16(x, INTERPRET: tl.constexpr):
    """fp32 -> bf16, round to nearest even (the GPU's cvt.rn.bf16.f32).  The interpreter's
    plain cast truncates (and its "rtne" mode drops the carry into the exponent), so there the
    value is first rounded in fp32 by the usual bit trick, after which truncation is exact."""
    if INTERPRET:
        bits = x.to(tl.uint32, bitcast=True)
        bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
        return bits.to(tl.float32, bitcast=True).to(tl.bfloat16)
    else:
        return x.to(tl.bfloat16)


@triton.jit
def _dsa_split_kernel(
    q_nope_ptr, q_pe_ptr, ckv_ptr, kpe_ptr, idx_ptr,
    m_ws_ptr, l_ws_ptr, acc_ws_ptr,
    scale_log2,
    num_heads, topk, num_splits,
    stride_qn_t, stride_qn_h, stride_qn_d,
    stride_qp_t, stride_qp_h, stride_qp_d,
    stride_ckv_p, stride_ckv_s, stride_ckv_d,
    stride_kpe_p, stride_kpe_s, stride_kpe_d,
    stride_idx_t, stride_idx_k,
    PAGE_SIZE: tl.constexpr,
    BLOCK_H: tl.constexpr, D_CKV: tl.constexpr, D_KPE: tl.constexpr,
    SPLIT: tl.constexpr, BLOCK_N: tl.constexpr, INTERPRET: tl.constexpr,
):
    t = tl.program_id(0)
    s = tl.program_id(1)
    t64 = t.to(tl.int64)

    offs_h = tl.arange(0, BLOCK_H)
    offs_c = tl.arange(0, D_CKV)
    offs_p = tl.arange(0, D_KPE)
    h_mask = offs_h < num_heads

    # Queries of this token, loaded once: [BLOCK_H, D_CKV] and [BLOCK_H, D_KPE] bf16.
    qn = tl.load(q_nope_ptr + t64 * stride_qn_t + offs_h[:, None] * stride_qn_h
                 + offs_c[None, :] * stride_qn_d, mask=h_mask[:, None], other=0.0)
    qp = tl.load(q_pe_ptr + t64 * stride_qp_t + offs_h[:, None] * stride_qp_h
                 + offs_p[None, :] * stride_qp_d, mask=h_mask[:, None], other=0.0)

    m_i = tl.full([BLOCK_H], float("-inf"), tl.float32)
    l_i = tl.zeros([BLOCK_H], tl.float32)
    acc = tl.zeros([BLOCK_H, D_CKV], tl.float32)

    idx_row = idx_ptr + t64 * stride_idx_t
    split_start = s * SPLIT
    split_end = tl.minimum(split_start + SPLIT, topk)
    offs_b = tl.arange(0, BLOCK_N)
    # The ids of the first tile; each iteration then loads the next tile's ids before its dots
    # and carries them (ids ahead: the gathers' addresses are in registers when they issue, no
    # dependent ld.global round trip in front of them).  Past the split's end: -1 (no load).
    ids = tl.load(idx_row + (split_start + offs_b) * stride_idx_k,
                  mask=split_start + offs_b < split_end, other=-1)
    for n0 in range(0, SPLIT, BLOCK_N):
        offs_next = split_start + n0 + BLOCK_N + offs_b
        ids_next = tl.load(idx_row + offs_next * stride_idx_k, mask=offs_next < split_end,
                           other=-1)
        valid = ids >= 0
        ids64 = tl.where(valid, ids, 0).to(tl.int64)
        page = ids64 // PAGE_SIZE
        slot = ids64 % PAGE_SIZE
        ckv_rows = page * stride_ckv_p + slot * stride_ckv_s
        kpe_rows = page * stride_kpe_p + slot * stride_kpe_s

        kc = tl.load(ckv_ptr + ckv_rows[:, None] + offs_c[None, :] * stride_ckv_d,
                     mask=valid[:, None], other=0.0)          # [BLOCK_N, D_CKV] bf16
        kp = tl.load(kpe_ptr + kpe_rows[:, None] + offs_p[None, :] * stride_kpe_d,
                     mask=valid[:, None], other=0.0)          # [BLOCK_N, D_KPE] bf16

        qk = _dot(qn, tl.trans(kc), None, INTERPRET)            # [BLOCK_H, BLOCK_N] fp32
        qk = _dot(qp, tl.trans(kp), qk, INTERPRET)
        qk = qk * scale_log2
        qk = tl.where(valid[None, :], qk, float("-inf"))

        m_new = tl.maximum(m_i, tl.max(qk, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        alpha = tl.exp2(m_i - m_safe)
        p = tl.exp2(qk - m_safe[:, None])
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        acc = _dot(_to_bf16(p, INTERPRET), kc, acc, INTERPRET)
        m_i = m_new
        ids = ids_next

    # Partials: m/l [T, splits, H], acc [T, splits, H, D_CKV] (contiguous fp32 scratch).
    row = (t64 * num_splits + s) * num_heads
    tl.store(m_ws_ptr + row + offs_h, m_i, mask=h_mask)
    tl.store(l_ws_ptr + row + offs_h, l_i, mask=h_mask)
    tl.store(acc_ws_ptr + (row + offs_h[:, None]) * D_CKV + offs_c[None, :], acc,
             mask=h_mask[:, None])


@triton.jit
def _dsa_combine_kernel(
    m_ws_ptr, l_ws_ptr, acc_ws_ptr, out_ptr, lse_ptr,
    num_heads, num_splits,
    stride_o_t, stride_o_h, stride_o_d,
    stride_lse_t, stride_lse_h,
    D_CKV: tl.constexpr, BLOCK_D: tl.constexpr, SPLIT_BLOCK: tl.constexpr,
    SPLIT_CHUNK: tl.constexpr, INTERPRET: tl.constexpr,
):
    t = tl.program_id(0)
    h = tl.program_id(1)
    dblk = tl.program_id(2)
    t64 = t.to(tl.int64)

    offs_s = tl.arange(0, SPLIT_BLOCK)
    offs_d = dblk * BLOCK_D + tl.arange(0, BLOCK_D)
    base = t64 * num_splits * num_heads + h  # + split * num_heads

    # Global max and denominator over all splits (SPLIT_BLOCK = next_pow2(num_splits) <= 128).
    smask = offs_s < num_splits
    m = tl.load(m_ws_ptr + base + offs_s * num_heads, mask=smask, other=float("-inf"))
    l = tl.load(l_ws_ptr + base + offs_s * num_heads, mask=smask, other=0.0)
    m_all = tl.max(m, 0)
    m_safe = tl.where(m_all == float("-inf"), 0.0, m_all)
    l_all = tl.sum(tl.exp2(m - m_safe) * l, 0)                  # empty / padded splits: 0

    # Weighted sum of the partial accumulators, SPLIT_CHUNK splits at a time (a whole
    # [64, 128] fp32 tile of pointers + values would need ~250 registers).
    acc = tl.zeros([BLOCK_D], tl.float32)
    for c0 in range(0, SPLIT_BLOCK, SPLIT_CHUNK):
        ss = c0 + tl.arange(0, SPLIT_CHUNK)
        cmask = ss < num_splits
        mc = tl.load(m_ws_ptr + base + ss * num_heads, mask=cmask, other=float("-inf"))
        wc = tl.exp2(mc - m_safe)
        a = tl.load(acc_ws_ptr + (base + ss[:, None] * num_heads) * D_CKV + offs_d[None, :],
                    mask=cmask[:, None], other=0.0)               # [SPLIT_CHUNK, BLOCK_D]
        acc += tl.sum(wc[:, None] * a, 0)

    has = l_all > 0.0
    inv = tl.where(has, 1.0 / tl.where(has, l_all, 1.0), 0.0)
    o = acc * inv
    tl.store(out_ptr + t64 * stride_o_t + h * stride_o_h + offs_d * stride_o_d,
             _to_bf16(o, INTERPRET))
    if dblk == 0:
        lse = tl.where(has, m_all + tl.log2(tl.where(has, l_all, 1.0)), float("-inf"))
        tl.store(lse_ptr + t64 * stride_lse_t + h * stride_lse_h, lse)


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def _split_config(num_tokens: int, topk: int):
    """(SPLIT, BLOCK_N, num_warps, num_stages[, maxnreg]) for kernel 1: slots per program,
    slots per tile, warps, software-pipeline depth of the gather loop (used when SPLIT >
    BLOCK_N), and an optional register cap per thread (Triton's ``maxnreg``).

    Grow the split (fewer programs, fewer fp32 partials) while T * splits stays >= one wave
    (~128 programs), up to 256 slots; from there, under the register cap (two programs per
    SM), while T * splits stays >= ~256.  Contest topk 2048: T=1 -> 32 (64 programs), T=2 -> 32
    (128), T=6,7 -> 64 (192, 224), T=8 -> 128 (128), T=40 -> 256 (320), T=64 -> 512 (256),
    T=128 -> 1024 (256).  Capped splits up to T = 32 (``_DOUBLE_BUFFER_MAX_TOKENS``) take two
    gather buffers instead of the cap and grow to one wave: T=16 -> 256 (128), T=32 -> 512 (128);
    there they beat the capped build by 4-17 % at T = 16 and ~2 % at T = 32, and lose up to 16 %
    at T = 64-128 (H100 device time, results/h100/2026-12-08-attn-candidates/, attn_both64).
    BLOCK_N 32 / 4 warps is the tile SGLang's grouped MLA decode kernel runs on Hopper with the
    same [16, 512] query block; splits of 128+ slots take 64-slot tiles on 8 warps (twice the
    rows in flight per program).  H200 device time, T = 32 / 64 / 128 at 128K context
    (the repository's DSA tuning harness, ``--attn-tokens``, 2026-12-02): 53.2 / 93.3 / 173.8 us
    uncapped at 256 slots, 42.3 / 64.9 / 110.4 us by this rule.
    """
    split = _MIN_SPLIT
    while split < _MAX_SPLIT and num_tokens * triton.cdiv(topk, 2 * split) >= _TARGET_PROGRAMS:
        split *= 2
    capped = split >= _MAX_SPLIT
    while capped and split < topk and num_tokens * triton.cdiv(topk, 2 * split) >= _CAPPED_PROGRAMS:
        split *= 2
    split = max(16, min(split, triton.next_power_of_2(topk)))
    # The combine kernel reads m/l of all splits as one vector: keep num_splits <= _MAX_SPLITS.
    while triton.cdiv(topk, split) > _MAX_SPLITS:
        split *= 2
    if capped and num_tokens <= _DOUBLE_BUFFER_MAX_TOKENS:
        while split < triton.next_power_of_2(topk) and num_tokens * triton.cdiv(topk, split) > _ONE_WAVE:
            split *= 2
        return split, 64, 8, 3
    if capped:
        return split, 64, 8, 2, _CAPPED_REGS
    if split >= 128:
        return split, 64, 8, 2
    return split, min(split, 32), 4, 2


def _combine_config(num_splits: int, d_ckv: int, interpret: bool):
    """(SPLIT_BLOCK, SPLIT_CHUNK, BLOCK_D) of the combine kernel.  On the GPU every split's
    partial slice is loaded in one shot (SPLIT_CHUNK = SPLIT_BLOCK: one L2 round trip instead
    of one per 16 splits) and the value dim is sliced so that a program holds 2048 fp32
    values (16 per thread): T=1 (64 splits) -> 32-wide slices, 256 programs."""
    split_block = max(2, triton.next_power_of_2(num_splits))
    if _COMBINE_BLOCK_D is not None:
        block_d = _COMBINE_BLOCK_D
    elif interpret:
        block_d = d_ckv  # the interpreter pays per program: whole rows
    else:
        block_d = max(16, min(d_ckv, 2048 // split_block))
    return split_block, split_block, block_d


def _launch(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, output, lse,
            warmup=False, record=None):
    """Allocate the fp32 partials and launch both kernels (``warmup``: compile only;
    ``record``: a list that receives each launch's compiled kernel and full arguments).
    Returns the workspaces."""
    num_tokens, num_heads, d_ckv = q_nope.shape
    d_kpe = q_pe.shape[-1]
    if num_tokens == 0:
        return []
    assert d_ckv >= 16 and d_ckv & (d_ckv - 1) == 0, "head_dim_ckv: power of two >= 16"
    assert d_kpe >= 16 and d_kpe & (d_kpe - 1) == 0, "head_dim_kpe: power of two >= 16"
    page_size = ckv_cache.shape[1]
    topk = sparse_indices.shape[1]
    split, block_n, num_warps, num_stages, *cap = _split_config(num_tokens, topk)
    num_splits = triton.cdiv(topk, split)
    block_h = max(16, triton.next_power_of_2(num_heads))
    dev = q_nope.device
    interpret = _interpreting()

    m_ws = torch.empty((num_tokens, num_splits, num_heads), dtype=torch.float32, device=dev)
    l_ws = torch.empty((num_tokens, num_splits, num_heads), dtype=torch.float32, device=dev)
    acc_ws = torch.empty((num_tokens, num_splits, num_heads, d_ckv), dtype=torch.float32,
                         device=dev)

    grid1 = (num_tokens, num_splits)
    args1 = (q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices,
             m_ws, l_ws, acc_ws,
             float(sm_scale) * LOG2E,
             num_heads, topk, num_splits,
             *q_nope.stride(), *q_pe.stride(),
             *ckv_cache.stride(), *kpe_cache.stride(),
             *sparse_indices.stride())
    meta1 = dict(PAGE_SIZE=page_size, BLOCK_H=block_h, D_CKV=d_ckv, D_KPE=d_kpe,
                 SPLIT=split, BLOCK_N=block_n, INTERPRET=interpret,
                 num_warps=num_warps, num_stages=num_stages)
    if cap and cap[0]:
        meta1["maxnreg"] = cap[0]     # a register cap per thread: two 8-warp programs per SM
    split_block, split_chunk, block_d = _combine_config(num_splits, d_ckv, interpret)
    grid2 = (num_tokens, num_heads, d_ckv // block_d)
    args2 = (m_ws, l_ws, acc_ws, output, lse, num_heads, num_splits,
             *output.stride(), *lse.stride())
    meta2 = dict(D_CKV=d_ckv, BLOCK_D=block_d, SPLIT_BLOCK=split_block,
                 SPLIT_CHUNK=split_chunk, INTERPRET=interpret, num_warps=4)
    for fn, grid, args, meta in ((_dsa_split_kernel, grid1, args1, meta1),
                                 (_dsa_combine_kernel, grid2, args2, meta2)):
        if warmup:
            fn.warmup(*args, grid=grid, **meta)
            continue
        compiled = fn[grid](*args, **meta)
        if record is not None:
            record.append(_launch_record(fn, compiled, grid, args, meta))
    return [m_ws, l_ws, acc_ws]


# ---------------------------------------------------------------------------------------------
# CUDA-graph replay of the two launches (launch_cache.py, the same module as in the indexer
# solution).  A graph bakes in everything the launches see: the data pointers, shapes, strides
# and dtypes of every input and output and the Python scalar sm_scale, so that is the key.

LAUNCH = "graph"        # "graph": replay a captured CUDA graph per call signature;
                        # "direct": call the compiled kernels' launchers with recorded arguments;
                        # None: the Triton JIT dispatcher on every call
_SLOTS = 8              # small LRU of call signatures (the gate rotates 2 buffer sets)
_cache = LaunchCache(_launch, _SLOTS)
_entries = _cache.entries


def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, output, lse):
    """Destination-passing entry point: writes every element of ``output`` and ``lse``."""
    args = (q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, output, lse)
    if LAUNCH and q_nope.is_cuda and not torch.cuda.is_current_stream_capturing():
        key = (_sig(q_nope), _sig(q_pe), _sig(ckv_cache), _sig(kpe_cache),
               _sig(sparse_indices), _sig(output), _sig(lse), float(sm_scale))
        if _cache(key, args, LAUNCH):
            return None
    _launch(*args)
    return None
