"""DSA lightning-indexer top-k (dsa_topk_indexer_fp8_h64_d128_topk2048_ps64) in Triton.

Inputs (DeepSeek-V3.2 indexer, decode):
  q_index_fp8        [B, H=64, D=128]        float8_e4m3fn
  k_index_cache_fp8  [P, PS=64, 1, D+4=132]  int8, DeepGEMM paged layout read as bytes: per page
                     PS*D FP8 bytes (token-major) then PS fp32 scales
  weights            [B, H] fp32
  seq_lens           [B] int32 (on the device, never read by the host)
  block_table        [B, max_pages] int32
  topk_indices       [B, topk] int32, written in full (destination-passing style)

score[t] = sum_h relu(q[b, h] . k_t * scale_t) * weights[b, h] for t < seq_len; the output holds
the global ids (page * PS + offset) of the top min(topk, seq_len) tokens, then -1.

Dispatch (on shapes only, no host synchronisation):
  * max_pages * PS <= topk: every valid token is selected; one launch, grid (B,), writes the
    block-table-mapped ids for t < seq_len and -1 after.
  * otherwise two launches:
      1. _score_kernel, grid (B, cdiv(max_pages, PAGES_PER_PROG)): per page one FP8 tl.dot
         K [PS x D] . q^T [D x H] -> fp32 [PS, H], x per-token scale, relu, x weights, sum over
         heads -> scores (scratch [B, max_pages*PS] fp32, -inf past seq_len).  Rows with
         seq_len <= topk are skipped (they take every token and need no scores).
      2. _topk_kernel, grid (B,): order-preserving int32 keys; bisection on [min, max] for the
         k-th largest key T (k = min(topk, seq_len)), stopping early at a midpoint with exactly
         k keys above it (~22 steps instead of 32 on random rows); ids with key > T and the
         first (k - #greater) ties are written at positions given by one packed cumsum; -1
         fills the slots from k on.  The row stays in registers when max_pages*PS <= 8192
         (every contest workload), else it is streamed in chunks of 4096 on every step.

Loops whose trip count depends on device data are `while` loops (the Triton interpreter cannot
take a tensor as a `range` bound); everything else has static trip counts.
"""

import torch
import triton
import triton.language as tl

# Rows up to this many tokens (block-table width * page size, rounded up to a power of two)
# keep their keys in registers during the top-k search; wider rows are streamed in chunks.
_RESIDENT_MAX_TOKENS = 8192
_CHUNK_TOKENS = 4096
# Scoring grid: aim for about this many programs (a few waves on 132 SMs) before packing
# several pages into one program.
_SCORE_TARGET_PROGRAMS = 1056
_MAX_PAGES_PER_PROG = 8


@triton.jit
def _all_selected_kernel(seq_ptr, bt_ptr, out_ptr, max_pages, stride_btb, stride_ob,
                         TOPK: tl.constexpr, TOPK_BLOCK: tl.constexpr, PS: tl.constexpr):
    """max_pages * PS <= topk: ids of tokens 0..seq_len-1 in order, then -1."""
    b = tl.program_id(0)
    seq = tl.load(seq_ptr + b)
    seq = tl.minimum(tl.maximum(seq, 0), max_pages * PS)
    offs = tl.arange(0, TOPK_BLOCK)
    valid = offs < seq
    page = tl.load(bt_ptr + b * stride_btb + offs // PS, mask=valid, other=0)
    ids = tl.where(valid, page * PS + offs % PS, -1)
    tl.store(out_ptr + b * stride_ob + offs, ids, mask=offs < TOPK)


@triton.jit
def _score_kernel(q_ptr, k_ptr, ks_ptr, w_ptr, seq_ptr, bt_ptr, score_ptr,
                  max_pages,
                  stride_qb, stride_qh, stride_wb, stride_btb, stride_sb,
                  TOPK: tl.constexpr, H: tl.constexpr, D: tl.constexpr, PS: tl.constexpr,
                  ROW_BYTES: tl.constexpr, PAGES_PER_PROG: tl.constexpr):
    """Scores of one row over pages [chunk*PAGES_PER_PROG, +PAGES_PER_PROG) of its block table."""
    b = tl.program_id(0)
    chunk = tl.program_id(1)
    seq = tl.load(seq_ptr + b)
    seq = tl.minimum(tl.maximum(seq, 0), max_pages * PS)
    n_pages = (seq + PS - 1) // PS
    p_lo = chunk * PAGES_PER_PROG
    # Rows with seq_len <= topk select every token and need no scores; chunks past the row's
    # last page have nothing to do.
    if (seq > TOPK) & (p_lo < n_pages):
        offs_h = tl.arange(0, H)
        offs_d = tl.arange(0, D)
        offs_t = tl.arange(0, PS)
        q = tl.load(q_ptr + b * stride_qb + offs_h[:, None] * stride_qh + offs_d[None, :])
        qt = tl.trans(q)                                          # [D, H]
        w = tl.load(w_ptr + b * stride_wb + offs_h)
        for i in tl.range(PAGES_PER_PROG, num_stages=3):
            # Static trip count, so the block-table and scale loads are software-pipelined;
            # pages past the row's end re-read its last page (a cache hit) and store nothing.
            p = p_lo + i
            in_row = p < n_pages
            page = tl.load(bt_ptr + b * stride_btb + tl.minimum(p, n_pages - 1)).to(tl.int64)
            k = tl.load(k_ptr + page * (PS * ROW_BYTES) + offs_t[:, None] * D + offs_d[None, :])
            scale = tl.load(ks_ptr + page * (PS * ROW_BYTES // 4) + (PS * D // 4) + offs_t)
            # Tokens as M: K is the K-major A operand, q^T (K-major, in shared memory once)
            # the B operand; the head sum then stays inside each warp.
            logits = tl.dot(k, qt)                                # [PS, H] fp32
            logits = tl.maximum(logits * scale[:, None], 0.0) * w[None, :]
            score = tl.sum(logits, axis=1)                        # [PS]
            tok = p * PS + offs_t
            score = tl.where(tok < seq, score, float("-inf"))
            tl.store(score_ptr + b * stride_sb + tok, score, mask=(offs_t < PS) & in_row)


@triton.jit
def _order_key(x):
    """fp32 -> int32 with the same order (signed compare); NaN sorts above +inf."""
    bits = x.to(tl.int32, bitcast=True)
    return tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)


@triton.jit
def _bisect_step(lo, hi, c_hi, cnt, mid, k):
    """One bisection step on count(key >= mid) = cnt.

    Invariants: count(key >= lo) >= k, count(key >= hi) = c_hi < k (or hi = lo + 1 after an
    exact hit).  An exact hit (cnt == k) ends the search: lo = mid - 1, hi = mid, so that
    'key > lo' selects exactly k keys and no ties are needed.
    """
    ge = cnt >= k
    exact = cnt == k
    new_lo = tl.where(exact, mid - 1, tl.where(ge, mid, lo))
    new_hi = tl.where(ge & (~exact), hi, mid)
    new_c_hi = tl.where(ge & (~exact), c_hi, cnt)
    return new_lo, new_hi, new_c_hi


@triton.jit
def _topk_kernel(score_ptr, seq_ptr, bt_ptr, out_ptr, max_pages,
                 stride_sb, stride_btb, stride_ob,
                 TOPK: tl.constexpr, TOPK_BLOCK: tl.constexpr, PS: tl.constexpr,
                 TILE: tl.constexpr, RESIDENT: tl.constexpr):
    """Top-k ids of one row.

    The threshold T is the k-th largest key (k = min(topk, seq_len)), found by bisection on
    [min key, max key + 1] in int64 (keys are int32) that stops early once some midpoint has
    exactly k keys at or above it.  Then ids with key > T go to positions 0.., and the first
    (k - #greater) ids with key == T after them; slots from k on get -1.
    """
    b = tl.program_id(0)
    seq = tl.load(seq_ptr + b)
    seq = tl.minimum(tl.maximum(seq, 0), max_pages * PS)
    k = tl.minimum(seq, TOPK)
    # Rows with seq_len <= topk were not scored: their keys read as 0, every valid token ties,
    # the search ends at once (min == max) and all of them are taken.
    scored = seq > TOPK
    row = score_ptr + b * stride_sb
    bt_row = bt_ptr + b * stride_btb
    out_row = out_ptr + b * stride_ob
    INT32_MAX: tl.constexpr = 2147483647
    INT32_MIN: tl.constexpr = -2147483648

    if RESIDENT:
        offs = tl.arange(0, TILE)
        valid = offs < seq
        key = _order_key(tl.load(row + offs, mask=valid & scored, other=0.0))
        lo = tl.min(tl.where(valid, key, INT32_MAX), axis=0).to(tl.int64)
        hi = tl.max(tl.where(valid, key, INT32_MIN), axis=0).to(tl.int64) + 1
        c_hi = tl.full([], 0, tl.int32)
        while hi - lo > 1:
            mid = lo + (hi - lo) // 2
            cnt = tl.sum((valid & (key >= mid.to(tl.int32))).to(tl.int32), axis=0)
            lo, hi, c_hi = _bisect_step(lo, hi, c_hi, cnt, mid, k)
        t32 = lo.to(tl.int32)
        n_gt = c_hi                                   # = count(key > T)
        gt = valid & (key > t32)
        eq = valid & (key == t32)
        # One scan for both ranks: greater-than count in the low 16 bits, ties in the high.
        csum = tl.cumsum(gt.to(tl.int32) + (eq.to(tl.int32) << 16), axis=0)
        rank_eq = (csum >> 16) - 1
        take = gt | (eq & (rank_eq < k - n_gt))
        pos = tl.where(gt, (csum & 0xFFFF) - 1, n_gt + rank_eq)
        page = tl.load(bt_row + offs // PS, mask=take, other=0)
        tl.store(out_row + pos, page * PS + offs % PS, mask=take)
    else:
        # Streamed: the row is re-read (from L2) in TILE-token chunks on every step.
        lo32 = tl.full([], INT32_MAX, tl.int32)
        hi32 = tl.full([], INT32_MIN, tl.int32)
        start = tl.full([], 0, tl.int32)
        while start < seq:
            offs = start + tl.arange(0, TILE)
            valid = offs < seq
            key = _order_key(tl.load(row + offs, mask=valid & scored, other=0.0))
            lo32 = tl.minimum(lo32, tl.min(tl.where(valid, key, INT32_MAX), axis=0))
            hi32 = tl.maximum(hi32, tl.max(tl.where(valid, key, INT32_MIN), axis=0))
            start += TILE
        lo = lo32.to(tl.int64)
        hi = hi32.to(tl.int64) + 1
        c_hi = tl.full([], 0, tl.int32)
        while hi - lo > 1:
            mid = lo + (hi - lo) // 2
            m32 = mid.to(tl.int32)
            cnt = tl.full([], 0, tl.int32)
            start = tl.full([], 0, tl.int32)
            while start < seq:
                offs = start + tl.arange(0, TILE)
                valid = offs < seq
                key = _order_key(tl.load(row + offs, mask=valid & scored, other=0.0))
                cnt += tl.sum((valid & (key >= m32)).to(tl.int32), axis=0)
                start += TILE
            lo, hi, c_hi = _bisect_step(lo, hi, c_hi, cnt, mid, k)
        t32 = lo.to(tl.int32)
        n_gt = c_hi
        need_eq = k - n_gt
        base_gt = tl.full([], 0, tl.int32)
        base_eq = tl.full([], 0, tl.int32)
        start = tl.full([], 0, tl.int32)
        while start < seq:
            offs = start + tl.arange(0, TILE)
            valid = offs < seq
            key = _order_key(tl.load(row + offs, mask=valid & scored, other=0.0))
            gt = valid & (key > t32)
            eq = valid & (key == t32)
            csum = tl.cumsum(gt.to(tl.int32) + (eq.to(tl.int32) << 16), axis=0)
            rank_eq = base_eq + (csum >> 16) - 1
            take = gt | (eq & (rank_eq < need_eq))
            pos = tl.where(gt, base_gt + (csum & 0xFFFF) - 1, n_gt + rank_eq)
            page = tl.load(bt_row + offs // PS, mask=take, other=0)
            tl.store(out_row + pos, page * PS + offs % PS, mask=take)
            base_gt += tl.sum(gt.to(tl.int32), axis=0)
            base_eq += tl.sum(eq.to(tl.int32), axis=0)
            start += TILE

    o = tl.arange(0, TOPK_BLOCK)
    tl.store(out_row + o, tl.full([TOPK_BLOCK], -1, tl.int32), mask=(o >= k) & (o < TOPK))


def _pages_per_prog(batch: int, max_pages: int) -> int:
    ppp = 1
    while ppp < _MAX_PAGES_PER_PROG and batch * triton.cdiv(max_pages, ppp) > _SCORE_TARGET_PROGRAMS:
        ppp *= 2
    return ppp


def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table, topk_indices):
    batch, heads, head_dim = q_index_fp8.shape
    page_size = k_index_cache_fp8.shape[1]
    row_bytes = k_index_cache_fp8.shape[-1]
    max_pages = block_table.shape[1]
    topk = topk_indices.shape[1]
    if batch == 0 or topk == 0:
        return topk_indices
    assert row_bytes == head_dim + 4 and (page_size * row_bytes) % 4 == 0
    assert k_index_cache_fp8.is_contiguous() and q_index_fp8.stride(2) == 1
    assert topk_indices.stride(1) == 1 and block_table.stride(1) == 1 and weights.stride(1) == 1
    topk_block = triton.next_power_of_2(topk)

    if max_pages * page_size <= topk:
        _all_selected_kernel[(batch,)](
            seq_lens, block_table, topk_indices, max_pages,
            block_table.stride(0), topk_indices.stride(0),
            TOPK=topk, TOPK_BLOCK=topk_block, PS=page_size, num_warps=4)
        return topk_indices

    tokens = max_pages * page_size
    scores = torch.empty((batch, tokens), dtype=torch.float32, device=q_index_fp8.device)
    k_fp8 = k_index_cache_fp8.view(torch.float8_e4m3fn)
    k_scales = k_index_cache_fp8.view(torch.float32)      # [P, PS, 1, row_bytes/4]
    ppp = _pages_per_prog(batch, max_pages)
    _score_kernel[(batch, triton.cdiv(max_pages, ppp))](
        q_index_fp8, k_fp8, k_scales, weights, seq_lens, block_table, scores,
        max_pages,
        q_index_fp8.stride(0), q_index_fp8.stride(1), weights.stride(0),
        block_table.stride(0), scores.stride(0),
        TOPK=topk, H=heads, D=head_dim, PS=page_size, ROW_BYTES=row_bytes, PAGES_PER_PROG=ppp,
        num_warps=4, num_stages=3)

    tile = triton.next_power_of_2(tokens)
    resident = tile <= _RESIDENT_MAX_TOKENS
    if not resident:
        tile = _CHUNK_TOKENS
    assert tile < 65536  # the packed cumsum keeps each rank in 16 bits
    _topk_kernel[(batch,)](
        scores, seq_lens, block_table, topk_indices, max_pages,
        scores.stride(0), block_table.stride(0), topk_indices.stride(0),
        TOPK=topk, TOPK_BLOCK=topk_block, PS=page_size, TILE=tile, RESIDENT=resident,
        num_warps=8)
    return topk_indices
