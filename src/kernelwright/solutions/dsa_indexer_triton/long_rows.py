"""The indexer's long-row path (rows of LONG_ROW_MIN_PAGES pages and more in the shipped
dispatch): the cost follows the K bytes of the call, spread over every SM.

Shapes and dtypes as in kernel.py; rows wider than topk only (kernel.py handles the others).
_score_kernel runs one program per item of a work list built on the device from seq_lens: one
item per PAGES_PER_ITEM pages of every row longer than topk, one pass-through item per shorter
row (the grid covers full-width rows; programs past the list return at once, so the cost
follows the pages of the call, not the batch width).  A score item runs one FP8 tl.dot per
64-token page (K [64 x 128] . q^T [128 x 64 heads] -> fp32 [64, 64], x per-token scale, relu,
x weights, sum over heads), stores the 64 scores to a scratch row and counts each score's
histogram bin (the top HIST_BITS bits of its order-preserving int32 key) into the row's global
histogram with atomics, then arrives on the row's counter.  The row's last arriver finds the
threshold bin T (the bin holding the topk-th largest score) and the count above it.
  - rows up to _ONE_LAUNCH_MAX_TOKENS wide (one launch): that last arriver then also filters
    the row (ids of keys in bins > T to the output, keys in bin T to a candidate list) and
    selects the remaining ones among the candidates;
  - wider rows (two launches): it stores T; _filter_kernel, grid (B, row tiles), filters
    every tile in parallel (output slots and candidate slots from one packed int64 atomic per
    tile) and the row's last arriving tile selects among the candidates.
The candidate select is exact: a search on the candidates' keys for the key of rank `need`
(common._kth_key, SELECT_PIVOTS pivots per count, stopping early on an exact count), the keys
above it taken, then the first ties.
All per-row counters and histograms live in a per-device workspace that every call leaves
zeroed (each last arriver resets what its row used).
"""

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from .common import (HIST_BITS as _HIST_BITS, HIST_COPIES as _MAX_STRIPES, CallShapes, _bin_bounds,
                     _key_bin, _kth_key, _order_key, _search_step, _threshold_bin,
                     row_workspace as _row_workspace)

# Rows up to this many tokens (block-table width * page size, rounded up to a power of two) are
# filtered and selected by the last scoring program of the row (one launch); wider rows by
# _filter_kernel (a second launch, many programs per row).
_ONE_LAUNCH_MAX_TOKENS = 8192
# Scores per filter step and candidates held in registers by the final select: in the scoring
# kernel (one-launch rows) and in _filter_kernel.  Larger candidate lists are streamed.
_ONE_LAUNCH_TILE = 2048
_FILTER_TILE = 8192
_CAND_TILE = 8192
# The candidate select's narrower block, taken when the threshold bin holds at most this many.
_SMALL_CAND_TILE = tl.constexpr(2048)
# Calls of at most _SMALL_FILTER_TOKENS tokens (batch x block-table width) filter in tiles of
# _SMALL_FILTER_TILE tokens on _SMALL_FILTER_WARPS warps (and hold up to that many candidates in
# registers): there the filter's few programs are a latency chain, and halving a program's
# block-wide steps pays; larger calls keep the 8192-token tiles (throughput).  The bound 2M tokens
# (64 x 32K, 16 x 128K) with the filter capped at 128 registers (kernel.MAXNREG: two 8-warp
# programs per SM) and the narrower candidate select below: 0.93 of the device time with a
# 512K bound, an uncapped filter and one select width, over 11 shapes of 16-64 rows x 16K-128K
# (geometric mean; 0.85-0.91 at 64 x 16K-32K and 16 x 64K; gate A/B on an H100,
# results/h100/2026-12-07-filter-tiles/).
_SMALL_FILTER_TOKENS = 1 << 21
_SMALL_FILTER_TILE = 4096
_SMALL_FILTER_WARPS = 8
# Scoring grid: one program per work item.  Pages per item: at most about _ITEMS_PER_PROGRAM
# items per resident program (_PROGRAMS_PER_SM 4-warp programs per SM) for the expected fill of
# a batch (each item costs a pipeline fill and an arrival round trip).  Registers (sm_90a AOT,
# Triton 3.6, two launches): 98 (4 programs per SM) at 1 page per item, and at 8-32 with 2-4
# histogram stripes; 130-146 (3 per SM) at 2-4 pages per item, and at 8-32 with one stripe (rows
# of 16K-32K tokens: the JIT compiles the argument stripes = 1 as a constant); 152-156 (3) with
# the one-launch select.
_PROGRAMS_PER_SM = 4
_ITEMS_PER_PROGRAM = 1
_MAX_PAGES_PER_ITEM = 32
# Pipeline depth of the page loop (block-table entry, then the K page and its scales): 5 keeps
# four 8 KB K pages in shared memory, three in flight.
_SCORE_STAGES = 5
# K width between promotions of the FP8 dot's accumulator to fp32 (tl.dot's
# max_num_imprecise_acc; the dot's K is 128): 64, one promotion per half of K, passed all 128
# contest workloads and the one full fast accumulation fails (6b10b6da, three trials) and took
# 64 x 8K from 49.0 to 40.8 us against 32 (gate A/B on an H100,
# results/h100/2026-12-07-imprecise64-gate/; see _score_pages).
IMPRECISE_ACC = 64
# Warps of _filter_kernel: 16 scores and 16 candidates per thread at the tiles above, 128
# registers (24 bytes of spill; ptxas, sm_90a, offline), one program and 8192 scores per SM.
_FILTER_WARPS = 16
# Histogram copies per row (item i counts into copy i % stripes) for wide rows, so that no bin
# address takes more than about 1/stripes of a long row's atomics.
_STRIPE_TOKENS = 32768
# Every scoring program holds the whole batch's seq_lens in one register block.
_MIN_BATCH_BLOCK = 64
# The candidate select's search for the k-th largest key: pivots from the count line (True) or
# bisection (False); common._kth_key.
INTERPOLATE = True
# Pivots per step of that search (common._kth_key): 1 as INTERPOLATE says, 2-4 that many in score
# space per block-wide count (INTERPOLATE then unused); 2 as short_rows.SELECT_PIVOTS (measured
# there): the filter kernel 0.87-0.94 of one pivot's at 16-64 rows of 16K-128K.
SELECT_PIVOTS = 2
# Stand-in for the SM count off CUDA (the interpreter).
_CPU_SMS = 2


# ---------------------------------------------------------------------------------------------
# Device helpers

@triton.jit
def _write_all_selected(seq, bt_row, out_row,
                        TOPK: tl.constexpr, TOPK_BLOCK: tl.constexpr, PS: tl.constexpr):
    """A row with seq <= TOPK tokens: ids of tokens 0..seq-1 in order, then -1."""
    offs = tl.arange(0, TOPK_BLOCK)
    valid = offs < seq
    page = tl.load(bt_row + offs // PS, mask=valid, other=0)
    ids = tl.where(valid, page * PS + offs % PS, -1)
    tl.store(out_row + offs, ids, mask=offs < TOPK)


@triton.jit
def _score_pages(q_ptr, k_ptr, ks_ptr, w_ptr, bt_row, score_row, hist_row, b, seq, n_pages, p_lo,
                 stride_qb, stride_qh, stride_wb,
                 H: tl.constexpr, D: tl.constexpr, PS: tl.constexpr, ROW_BYTES: tl.constexpr,
                 PAGES: tl.constexpr, HIST_BITS: tl.constexpr, STAGES: tl.constexpr,
                 IMPRECISE: tl.constexpr):
    """Scores of row b's block-table slots [p_lo, p_lo + PAGES) below n_pages: stored to
    score_row (token positions), and one count per score added to hist_row[bin]."""
    offs_h = tl.arange(0, H)
    offs_d = tl.arange(0, D)
    offs_t = tl.arange(0, PS)
    q = tl.load(q_ptr + b * stride_qb + offs_h[:, None] * stride_qh + offs_d[None, :])
    qt = tl.trans(q)                                              # [D, H]
    w = tl.load(w_ptr + b * stride_wb + offs_h)
    for i in tl.range(PAGES, num_stages=STAGES):
        # Static trip count, so the block-table, K and scale loads are software-pipelined;
        # slots past the row's end re-read its last page (a cache hit) and store nothing.
        p = p_lo + i
        page = tl.load(bt_row + tl.minimum(p, n_pages - 1)).to(tl.int64)
        k = tl.load(k_ptr + page * (PS * ROW_BYTES) + offs_t[:, None] * D + offs_d[None, :])
        scale = tl.load(ks_ptr + page * (PS * ROW_BYTES // 4) + (PS * D // 4) + offs_t)
        # Tokens as M: K is the K-major A operand, q^T (K-major, in shared memory once) the B
        # operand; the head sum then stays inside each warp.
        # max_num_imprecise_acc=IMPRECISE (IMPRECISE_ACC): promote to fp32 after every
        # IMPRECISE-wide k step.  Hopper's default FP8 fast accumulation moves scores by ~1e-2
        # near the top-k threshold, enough to swap a token there and fail the sorted-score
        # check (seen on the H200 for this kernel and for DeepGEMM's logits alike, workload
        # 6b10b6da).
        logits = tl.dot(k, qt, max_num_imprecise_acc=IMPRECISE)   # [PS, H] fp32
        # The layout's per-token scales are amax / 448 >= 0, so relu(scale * x) equals
        # scale * relu(x): the scale is applied once per token, after the head sum.
        score = tl.sum(tl.maximum(logits, 0.0) * w[None, :], axis=1) * scale   # [PS]
        tok = p * PS + offs_t
        valid = tok < seq
        tl.store(score_row + tok, score, mask=valid)
        tl.atomic_add(hist_row + _key_bin(_order_key(score), HIST_BITS), 1, mask=valid,
                      sem="relaxed")


@triton.jit
def _filter_tile(score_row, bt_row, out_row, cand_key_row, cand_id_row, cursor, t0, seq,
                 thr_bin, base_gt, base_eq,
                 TILE: tl.constexpr, PS: tl.constexpr, HIST_BITS: tl.constexpr,
                 ATOMIC_BASES: tl.constexpr):
    """Tokens [t0, t0 + TILE) of a scored row: ids of keys in bins > thr_bin go to out_row
    from slot base_gt on, (key, id) of keys in bin thr_bin to the candidate lists from base_eq
    on.  ATOMIC_BASES: the two bases come instead from one atomic add on the row's packed
    int64 cursor (low half: output slots, high half: candidate slots).  Returns the two counts."""
    offs = t0 + tl.arange(0, TILE)
    valid = offs < seq
    # The block-table entries are loaded for every valid token (TILE / PS distinct ones), so
    # that this load does not wait for the scores.
    page = tl.load(bt_row + offs // PS, mask=valid, other=0)
    # .cg: in the one-launch path the scores were stored by other programs of this launch.
    key = _order_key(tl.load(score_row + offs, mask=valid, other=0.0, cache_modifier=".cg"))
    bins = _key_bin(key, HIST_BITS)
    gt = valid & (bins > thr_bin)
    eq = valid & (bins == thr_bin)
    ids = page * PS + offs % PS
    # One scan for both ranks: greater-than flags in the low 16 bits, bin-T flags in the high.
    csum = tl.cumsum(gt.to(tl.int32) + (eq.to(tl.int32) << 16), axis=0)
    n_gt = tl.sum(gt.to(tl.int32), axis=0)
    n_eq = tl.sum(eq.to(tl.int32), axis=0)
    if ATOMIC_BASES:
        bases = tl.atomic_add(cursor, n_gt.to(tl.int64) + (n_eq.to(tl.int64) << 32), sem="relaxed")
        base_gt = (bases & 0xFFFFFFFF).to(tl.int32)
        base_eq = (bases >> 32).to(tl.int32)
    tl.store(out_row + base_gt + (csum & 0xFFFF) - 1, ids, mask=gt)
    slot = base_eq + (csum >> 16) - 1
    tl.store(cand_key_row + slot, key, mask=eq)
    tl.store(cand_id_row + slot, ids, mask=eq)
    return n_gt, n_eq


@triton.jit
def _select_resident(cand_key_row, cand_id_row, n, k, out_row, pos0, lo, hi,
                     TILE: tl.constexpr, INTERPOLATE: tl.constexpr, PIVOTS: tl.constexpr):
    """The k largest of n <= TILE candidates, held in registers: their ids go to
    out_row[pos0 : pos0 + k] (any order; among equal keys the first ones in list order).

    Every candidate's key lies in [lo, hi) (int64: the threshold bin's keys), so the search for
    the k-th largest key T starts there with counts n and 0 (common._kth_key); then keys > T go
    to slots pos0.., the first (k - #greater) keys == T after them (one packed cumsum).
    """
    offs = tl.arange(0, TILE)
    valid = offs < n
    # .cg: the candidates were stored by other programs of this launch.
    key = tl.load(cand_key_row + offs, mask=valid, other=0, cache_modifier=".cg")
    ids = tl.load(cand_id_row + offs, mask=valid, other=0, cache_modifier=".cg")
    t32, c_hi = _kth_key(key, valid, lo, hi, n, tl.full([], 0, tl.int32), k, INTERPOLATE, PIVOTS)
    gt = valid & (key > t32)
    eq = valid & (key == t32)
    csum = tl.cumsum(gt.to(tl.int32) + (eq.to(tl.int32) << 16), axis=0)
    rank_eq = (csum >> 16) - 1
    take = gt | (eq & (rank_eq < k - c_hi))
    pos = pos0 + tl.where(gt, (csum & 0xFFFF) - 1, c_hi + rank_eq)
    tl.store(out_row + pos, ids, mask=take)


@triton.jit
def _select_streamed(cand_key_row, cand_id_row, n, k, out_row, pos0, lo, hi, TILE: tl.constexpr):
    """As _select_resident for n > TILE candidates: bisection, the list re-read (from L2) in
    TILE-key chunks on every step."""
    c_lo = n
    c_hi = tl.full([], 0, tl.int32)
    while hi - lo > 1:
        mid = lo + (hi - lo) // 2
        m32 = mid.to(tl.int32)
        cnt = tl.full([], 0, tl.int32)
        start = tl.full([], 0, tl.int32)
        while start < n:
            offs = start + tl.arange(0, TILE)
            valid = offs < n
            key = tl.load(cand_key_row + offs, mask=valid, other=0, cache_modifier=".cg")
            cnt += tl.sum((valid & (key >= m32)).to(tl.int32), axis=0)
            start += TILE
        lo, hi, c_lo, c_hi = _search_step(lo, hi, c_lo, c_hi, cnt, mid, k)
    t32 = lo.to(tl.int32)
    need_eq = k - c_hi
    base_gt = tl.full([], 0, tl.int32)
    base_eq = tl.full([], 0, tl.int32)
    start = tl.full([], 0, tl.int32)
    while start < n:
        offs = start + tl.arange(0, TILE)
        valid = offs < n
        key = tl.load(cand_key_row + offs, mask=valid, other=0, cache_modifier=".cg")
        gt = valid & (key > t32)
        eq = valid & (key == t32)
        csum = tl.cumsum(gt.to(tl.int32) + (eq.to(tl.int32) << 16), axis=0)
        rank_eq = base_eq + (csum >> 16) - 1
        take = gt | (eq & (rank_eq < need_eq))
        pos = pos0 + tl.where(gt, base_gt + (csum & 0xFFFF) - 1, c_hi + rank_eq)
        ids = tl.load(cand_id_row + offs, mask=take, other=0, cache_modifier=".cg")
        tl.store(out_row + pos, ids, mask=take)
        base_gt += tl.sum(gt.to(tl.int32), axis=0)
        base_eq += tl.sum(eq.to(tl.int32), axis=0)
        start += TILE


@triton.jit
def _select_candidates(cand_key_row, cand_id_row, n, k, out_row, pos0, thr,
                       HIST_BITS: tl.constexpr, TILE: tl.constexpr, INTERPOLATE: tl.constexpr,
                       PIVOTS: tl.constexpr):
    """The k largest of the row's n candidates (k <= n; all in histogram bin thr) to
    out_row[pos0 : pos0 + k]."""
    lo, hi = _bin_bounds(thr, HIST_BITS)
    # Most threshold bins hold at most 2048 candidates (rows of 16K-64K tokens): a block that
    # wide makes each block-wide count of the search 2-4x cheaper than one TILE wide.
    SMALL: tl.constexpr = _SMALL_CAND_TILE if TILE > _SMALL_CAND_TILE else TILE
    if n <= SMALL:
        _select_resident(cand_key_row, cand_id_row, n, k, out_row, pos0, lo, hi, SMALL, INTERPOLATE, PIVOTS)
    elif n <= TILE:
        _select_resident(cand_key_row, cand_id_row, n, k, out_row, pos0, lo, hi, TILE, INTERPOLATE, PIVOTS)
    else:
        _select_streamed(cand_key_row, cand_id_row, n, k, out_row, pos0, lo, hi, TILE)


# ---------------------------------------------------------------------------------------------
# Kernels

@triton.jit
def _score_kernel(q_ptr, k_ptr, ks_ptr, w_ptr, seq_ptr, bt_ptr, score_ptr, hist_ptr, arrive_ptr,
                  state_ptr, cand_key_ptr, cand_id_ptr, out_ptr,
                  batch, max_pages, stripes,
                  stride_qb, stride_qh, stride_wb, stride_btb, stride_sb, stride_ob,
                  TOPK: tl.constexpr, TOPK_BLOCK: tl.constexpr, H: tl.constexpr,
                  D: tl.constexpr, PS: tl.constexpr, ROW_BYTES: tl.constexpr,
                  PAGES_PER_ITEM: tl.constexpr, BATCH_BLOCK: tl.constexpr,
                  HIST_BITS: tl.constexpr, MAX_STRIPES: tl.constexpr, STAGES: tl.constexpr,
                  SELECT_HERE: tl.constexpr, TILE: tl.constexpr, INTERPOLATE: tl.constexpr, PIVOTS: tl.constexpr,
                  IMPRECISE: tl.constexpr):
    """One program per work item of the call (see the module docstring); the grid covers a
    batch of full-width rows, programs past the call's item count return at once.

    Every program builds the same work list from seq_lens: row b has cdiv(cdiv(seq, PS),
    PAGES_PER_ITEM) score items if seq > TOPK, else one pass-through item; items are numbered
    row after row.  A score item ends with an arrival on the row's counter (acq_rel atomic
    after a CTA barrier, so that its score stores and histogram atomics happen before it); the
    last arriver resets the counter, reads and zeroes the row's histogram (_threshold_bin),
    then either filters and selects the row itself (SELECT_HERE, TILE-token steps) or leaves
    (T, above, inside) in state[b] for _filter_kernel.
    """
    NB: tl.constexpr = 1 << HIST_BITS
    item = tl.program_id(0)
    rows = tl.arange(0, BATCH_BLOCK)
    in_batch = rows < batch
    seqs = tl.load(seq_ptr + rows, mask=in_batch, other=0)
    seqs = tl.minimum(tl.maximum(seqs, 0), max_pages * PS)
    items = tl.where(seqs > TOPK, (seqs + PS * PAGES_PER_ITEM - 1) // (PS * PAGES_PER_ITEM),
                     in_batch.to(tl.int32))
    ends = tl.cumsum(items, axis=0)
    if item < tl.sum(items, axis=0):
        b = tl.sum((ends <= item).to(tl.int32), axis=0)
        mine = rows == b
        seq = tl.sum(tl.where(mine, seqs, 0), axis=0)
        row_items = tl.sum(tl.where(mine, items, 0), axis=0)
        chunk = item - (tl.sum(tl.where(mine, ends, 0), axis=0) - row_items)
        bt_row = bt_ptr + b * stride_btb
        out_row = out_ptr + b * stride_ob
        if seq > TOPK:
            hist_row = hist_ptr + b * (stripes * NB)
            score_row = score_ptr + b * stride_sb
            _score_pages(q_ptr, k_ptr, ks_ptr, w_ptr, bt_row, score_row,
                         hist_row + (chunk % stripes) * NB, b, seq, (seq + PS - 1) // PS,
                         chunk * PAGES_PER_ITEM, stride_qb, stride_qh, stride_wb,
                         H, D, PS, ROW_BYTES, PAGES_PER_ITEM, HIST_BITS, STAGES, IMPRECISE)
            tl.debug_barrier()
            arrived = tl.atomic_add(arrive_ptr + b, 1, sem="acq_rel")
            if arrived == row_items - 1:
                tl.store(arrive_ptr + b, 0)
                thr, above, inside = _threshold_bin(hist_row, stripes, TOPK, HIST_BITS, MAX_STRIPES, True)
                if SELECT_HERE:
                    cand_key_row = cand_key_ptr + b * stride_sb
                    cand_id_row = cand_id_ptr + b * stride_sb
                    n_gt = tl.full([], 0, tl.int32)
                    n_eq = tl.full([], 0, tl.int32)
                    t0 = tl.full([], 0, tl.int32)
                    while t0 < seq:
                        # Running bases (ATOMIC_BASES False: the cursor argument is unused).
                        tile_gt, tile_eq = _filter_tile(
                            score_row, bt_row, out_row, cand_key_row, cand_id_row, arrive_ptr,
                            t0, seq, thr, n_gt, n_eq, TILE, PS, HIST_BITS, False)
                        n_gt += tile_gt
                        n_eq += tile_eq
                        t0 += TILE
                    tl.debug_barrier()           # candidate stores before their loads
                    _select_candidates(cand_key_row, cand_id_row, inside, TOPK - above,
                                       out_row, above, thr, HIST_BITS, TILE, INTERPOLATE, PIVOTS)
                else:
                    tl.store(state_ptr + b * 4, thr)
                    tl.store(state_ptr + b * 4 + 1, above)
                    tl.store(state_ptr + b * 4 + 2, inside)
        else:
            _write_all_selected(seq, bt_row, out_row, TOPK, TOPK_BLOCK, PS)


@triton.jit
def _filter_kernel(seq_ptr, bt_ptr, score_ptr, state_ptr, cursor_ptr, arrive_ptr,
                   cand_key_ptr, cand_id_ptr, out_ptr,
                   max_pages, stride_btb, stride_sb, stride_ob,
                   TOPK: tl.constexpr, PS: tl.constexpr, HIST_BITS: tl.constexpr,
                   TILE: tl.constexpr, CAND_TILE: tl.constexpr, INTERPOLATE: tl.constexpr,
                   PIVOTS: tl.constexpr):
    """Two-launch path, after _score_kernel: program (b, j) filters tokens [j*TILE, +TILE) of a
    scored row b against state[b]'s threshold bin (_filter_tile with atomic bases), then
    arrives on the row's counter; the last arriver resets the counter and the cursor and
    selects the row's remaining TOPK - above ids among the candidates."""
    b = tl.program_id(0)
    j = tl.program_id(1)
    seq = tl.load(seq_ptr + b)
    seq = tl.minimum(tl.maximum(seq, 0), max_pages * PS)
    if (seq > TOPK) & (j * TILE < seq):
        thr = tl.load(state_ptr + b * 4)
        above = tl.load(state_ptr + b * 4 + 1)
        inside = tl.load(state_ptr + b * 4 + 2)
        bt_row = bt_ptr + b * stride_btb
        out_row = out_ptr + b * stride_ob
        cand_key_row = cand_key_ptr + b * stride_sb
        cand_id_row = cand_id_ptr + b * stride_sb
        zero = tl.full([], 0, tl.int32)
        _filter_tile(score_ptr + b * stride_sb, bt_row, out_row, cand_key_row, cand_id_row,
                     cursor_ptr + b, j * TILE, seq, thr, zero, zero, TILE, PS, HIST_BITS, True)
        tl.debug_barrier()
        arrived = tl.atomic_add(arrive_ptr + b, 1, sem="acq_rel")
        if arrived == (seq + TILE - 1) // TILE - 1:
            tl.store(arrive_ptr + b, 0)
            tl.store(cursor_ptr + b, tl.full([], 0, tl.int64))
            _select_candidates(cand_key_row, cand_id_row, inside, TOPK - above, out_row, above,
                               thr, HIST_BITS, CAND_TILE, INTERPOLATE, PIVOTS)


# ---------------------------------------------------------------------------------------------
# Host side: the plan of a call (shapes only) and the persistent per-row workspace.

class _Plan(NamedTuple):
    one_launch: bool      # filter + select in the scoring kernel's last arrivers
    pages_per_item: int   # pages of one score work item
    stripes: int          # histogram copies per row


def _num_sms(device) -> int:
    if device.type != "cuda":
        return _CPU_SMS
    return torch.cuda.get_device_properties(device).multi_processor_count


def _plan(batch: int, max_pages: int, page_size: int, num_sms: int) -> _Plan:
    """The launch plan for a call of these shapes (rows wider than topk exist).

    pages_per_item: the smallest power of two (<= _MAX_PAGES_PER_ITEM) for which the items of
    the expected batch number at most _ITEMS_PER_PROGRAM per resident program (_PROGRAMS_PER_SM
    per SM).  The expected batch: rows averaging half the width (lengths spread below the
    width, one full row), i.e. the pages of (batch + 1) // 2 full rows; a batch of one is one
    full row.  The scoring grid has one program per item of a batch of full rows, so that any
    seq_lens fit it.
    """
    tokens = max_pages * page_size
    resident = num_sms * _PROGRAMS_PER_SM
    ppi = 1
    expected_rows = (batch + 1) // 2
    while ppi < _MAX_PAGES_PER_ITEM and expected_rows * triton.cdiv(max_pages, ppi) > _ITEMS_PER_PROGRAM * resident:
        ppi *= 2
    stripes = max(1, min(_MAX_STRIPES, triton.next_power_of_2(tokens) // _STRIPE_TOKENS))
    one_launch = triton.next_power_of_2(tokens) <= _ONE_LAUNCH_MAX_TOKENS
    return _Plan(one_launch, ppi, stripes)


def launches(shapes: CallShapes, q_index_fp8, k_fp8, k_scales, weights, seq_lens, block_table,
             topk_indices):
    """The launches of a call whose rows are wider than topk, as ([(kernel, grid, args, meta)],
    [per-call scratch tensors: scores fp32, candidate keys int32, candidate ids int32, each
    [B, max_pages * PS]]).  k_fp8 / k_scales: the K cache as common.k_cache_views gives it."""
    assert max(_FILTER_TILE, _CAND_TILE, _ONE_LAUNCH_TILE) < 65536  # 16-bit packed ranks
    batch, topk, page_size, max_pages = shapes.batch, shapes.topk, shapes.page_size, shapes.max_pages
    tokens = shapes.tokens
    dev = q_index_fp8.device
    plan = _plan(batch, max_pages, page_size, _num_sms(dev))
    scores = torch.empty((batch, tokens), dtype=torch.float32, device=dev)
    cand_keys = torch.empty((batch, tokens), dtype=torch.int32, device=dev)
    cand_ids = torch.empty((batch, tokens), dtype=torch.int32, device=dev)
    ws = _row_workspace(dev, batch, _MAX_STRIPES << _HIST_BITS)
    programs = batch * triton.cdiv(max_pages, plan.pages_per_item)
    launches = [(_score_kernel, (programs,), (
        q_index_fp8, k_fp8, k_scales, weights, seq_lens, block_table, scores, ws.hist,
        ws.arrive[0], ws.state, cand_keys, cand_ids, topk_indices,
        batch, max_pages, plan.stripes,
        q_index_fp8.stride(0), q_index_fp8.stride(1), weights.stride(0),
        block_table.stride(0), scores.stride(0), topk_indices.stride(0)),
        dict(TOPK=topk, TOPK_BLOCK=shapes.topk_block, H=shapes.heads, D=shapes.head_dim,
             PS=page_size, ROW_BYTES=shapes.row_bytes, PAGES_PER_ITEM=plan.pages_per_item,
             BATCH_BLOCK=max(_MIN_BATCH_BLOCK, triton.next_power_of_2(batch)),
             HIST_BITS=_HIST_BITS, MAX_STRIPES=_MAX_STRIPES, STAGES=_SCORE_STAGES,
             SELECT_HERE=plan.one_launch,
             TILE=_ONE_LAUNCH_TILE, INTERPOLATE=INTERPOLATE, PIVOTS=SELECT_PIVOTS, IMPRECISE=IMPRECISE_ACC, num_warps=4))]
    if not plan.one_launch:
        small = batch * tokens <= _SMALL_FILTER_TOKENS
        tile = _SMALL_FILTER_TILE if small else _FILTER_TILE
        launches.append((_filter_kernel, (batch, triton.cdiv(tokens, tile)), (
            seq_lens, block_table, scores, ws.state, ws.cursor, ws.arrive[1],
            cand_keys, cand_ids, topk_indices,
            max_pages, block_table.stride(0), scores.stride(0), topk_indices.stride(0)),
            dict(TOPK=topk, PS=page_size, HIST_BITS=_HIST_BITS, TILE=tile,
                 CAND_TILE=min(tile, _CAND_TILE), INTERPOLATE=INTERPOLATE, PIVOTS=SELECT_PIVOTS,
                 num_warps=_SMALL_FILTER_WARPS if small else _FILTER_WARPS)))
    return launches, [scores, cand_keys, cand_ids]
