"""The indexer's short-row path (rows up to LONG_ROW_MIN_PAGES pages wide in the shipped
dispatch: every contest workload): one program, or a few, per row.

Shapes and dtypes as in kernel.py; rows wider than topk only (kernel.py handles the others).
Schedule (on shapes only, no host synchronisation), by the row tile next_pow2(max_pages * PS):
  * 4096 and 16384: one launch, _fused_kernel, grid (B, chunks): each program scores groups of
    PPD pages (one FP8 tl.dot per group, K [PPD*PS x D] . q^T [D x H] -> fp32 [PPD*PS, H],
    x per-token scale, relu, x weights, sum over heads) into a scratch row [B, max_pages*PS]
    fp32 (-inf past seq_len), then arrives on the row's counter; the last program of the row
    to arrive resets the counter and selects the top-k with the row in registers:
    order-preserving int32 keys, the k-th largest key T searched with two pivots per block-wide
    count (common._kth_key; early stop on an exact count), then ids with key > T and the first (k - #greater) ties written at positions from
    one packed cumsum; -1 fills the slots from k on.
  * 8192 (65-128 pages): two launches, _score_kernel (4-warp programs) then
    _topk_resident_kernel (the same selection, one 8-warp program per row); measured faster
    than the fused kernel there.
  * wider tiles (> 256 pages; reached only when this path is forced, see kernel.FORCE_PATH):
    two launches, _score_kernel then _topk_kernel (bisection, the row streamed in chunks of
    4096 on every step).
"""

import torch
import triton
import triton.language as tl

from .common import (HIST_BITS, CallShapes, _bin_bounds, _key_bin, _kth_key, _order_key, _search_step,
                     _threshold_bin, row_workspace)


# Rows up to this many tokens (block-table width * page size, rounded up to a power of two)
# take the fused one-launch path and keep their keys in registers during the top-k search;
# wider rows are scored by _score_kernel and streamed through _topk_kernel in chunks.
_RESIDENT_MAX_TOKENS = 16384
_CHUNK_TOKENS = 4096
# Fused grid: at most about this many warps in flight (132 SMs x 32) before several page groups
# are packed into one program.
_FUSED_TARGET_WARPS = 4224
_MAX_GROUPS_PER_PROG = 8
# Tiles that take the split (score kernel + resident top-k kernel) path instead of the fused one.
_SPLIT_TILES = (8192,)
_SPLIT_TOPK_WARPS = 8
# The resident selects (fused and split schedules) of batches up to HIST_MAX_BATCH rows start from
# the histogram bin of the k-th largest score, counted by atomics in the scoring epilogue, and
# search inside it with pivots from the count line (common._kth_key); larger batches (and HIST
# False) bisect over the whole row's keys.  Measured (experiments/indexer_ab.py, H100; the gate on
# the H200): 6-13 % faster at 1-4 rows of 4K-8K tokens, level to slower from 16 rows (the
# epilogue's atomics on the hot bins of many histograms).
HIST = True
HIST_MAX_BATCH = 8
# Pivots per step of the resident selects' search for the k-th largest key (common._kth_key):
# 1 = one pivot (the count line in key space inside the histogram bin, else bisection over the
# row); 2-4 = that many in score space, counted in one block-wide reduction.  2: gate A/B over the
# envelope on an H100 (results/h100/2026-12-07-select-pivots/), 0.963 of one pivot's device time
# (geometric mean; 0.84-0.93 at 16-64 rows of 4K-8K), 4 pivots 0.99 (each step costs more).
SELECT_PIVOTS = 2
# Streamed path's scoring grid: aim for about this many programs (a few waves on 132 SMs)
# before packing several pages into one program.
_SCORE_TARGET_PROGRAMS = 1056
# K width between promotions of the FP8 dot's accumulator to fp32 (tl.dot's
# max_num_imprecise_acc; the dot's K is 128): 64, as long_rows.IMPRECISE_ACC (the measurement
# is there).
IMPRECISE_ACC = 64
_MAX_PAGES_PER_PROG = 8


@triton.jit
def _score_kernel(q_ptr, k_ptr, ks_ptr, w_ptr, seq_ptr, bt_ptr, score_ptr, hist_ptr,
                  max_pages,
                  stride_qb, stride_qh, stride_wb, stride_btb, stride_sb, stride_hb,
                  TOPK: tl.constexpr, H: tl.constexpr, D: tl.constexpr, PS: tl.constexpr,
                  ROW_BYTES: tl.constexpr, PAGES_PER_PROG: tl.constexpr, HIST: tl.constexpr,
                  HIST_BITS: tl.constexpr, IMPRECISE: tl.constexpr):
    """Scores of one row over pages [chunk*PAGES_PER_PROG, +PAGES_PER_PROG) of its block table
    (HIST: and one count per score into the row's histogram bin, hist_ptr [B, >= 2**HIST_BITS])."""
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
            # max_num_imprecise_acc=IMPRECISE (IMPRECISE_ACC): promote to fp32 after every
            # IMPRECISE-wide k step.  Hopper's default
            # FP8 fast accumulation moves scores by ~1e-2 near the top-k threshold, enough to swap a
            # token there and fail the sorted-score check (seen on the H200 for this kernel and for
            # DeepGEMM's logits alike, workload 6b10b6da).
            logits = tl.dot(k, qt, max_num_imprecise_acc=IMPRECISE)  # [PS, H] fp32
            logits = tl.maximum(logits * scale[:, None], 0.0) * w[None, :]
            score = tl.sum(logits, axis=1)                        # [PS]
            tok = p * PS + offs_t
            score = tl.where(tok < seq, score, float("-inf"))
            tl.store(score_ptr + b * stride_sb + tok, score, mask=(offs_t < PS) & in_row)
            if HIST:
                tl.atomic_add(hist_ptr + b * stride_hb + _key_bin(_order_key(score), HIST_BITS), 1,
                              mask=in_row & (tok < seq), sem="relaxed")


@triton.jit
def _select_resident(row, seq, k, scored, bt_row, out_row, hist_row,
                     TOPK: tl.constexpr, TOPK_BLOCK: tl.constexpr, PS: tl.constexpr,
                     TILE: tl.constexpr, HIST: tl.constexpr, HIST_BITS: tl.constexpr,
                     PIVOTS: tl.constexpr):
    """Top-k ids of one row whose TILE >= seq keys stay in registers.

    The threshold T is the k-th largest key (k = min(topk, seq_len)), found by common._kth_key
    in one block-wide count per step.  HIST: the scoring epilogue counted the row's keys into
    histogram bins (hist_row, HIST_BITS bits), so the search starts inside the bin that holds
    T (read and zeroed here), else from [min key, max key + 1]; PIVOTS pivots per step
    (common._kth_key).  Then ids with key > T go to slots 0.., the first (k - #greater) ids with
    key == T after them (one packed cumsum); slots from k on get -1.
    Rows that were not scored (seq_len <= topk) read every key as 0 and take them all.
    """
    INT32_MAX: tl.constexpr = 2147483647
    INT32_MIN: tl.constexpr = -2147483648
    offs = tl.arange(0, TILE)
    valid = offs < seq
    # .cg: the scores were written by other programs of this launch; read them from L2.
    key = _order_key(tl.load(row + offs, mask=valid & scored, other=0.0, cache_modifier=".cg"))
    if HIST:
        if scored:
            thr, above, inside = _threshold_bin(hist_row, 1, k, HIST_BITS, 1, True)
            lo, hi = _bin_bounds(thr, HIST_BITS)
            c_lo = above + inside
            c_hi = above
        else:
            # every key is 0 and all k = seq_len of them are taken: key > -1 selects them
            lo = tl.full([], -1, tl.int64)
            hi = tl.full([], 0, tl.int64)
            c_lo = seq
            c_hi = seq
    else:
        lo = tl.min(tl.where(valid, key, INT32_MAX), axis=0).to(tl.int64)
        hi = tl.max(tl.where(valid, key, INT32_MIN), axis=0).to(tl.int64) + 1
        c_lo = seq
        c_hi = tl.full([], 0, tl.int32)
    t32, n_gt = _kth_key(key, valid, lo, hi, c_lo, c_hi, k, HIST, PIVOTS)   # n_gt = count(key > T)
    gt = valid & (key > t32)
    eq = valid & (key == t32)
    # One scan for both ranks: greater-than count in the low 16 bits, ties in the high.
    csum = tl.cumsum(gt.to(tl.int32) + (eq.to(tl.int32) << 16), axis=0)
    rank_eq = (csum >> 16) - 1
    take = gt | (eq & (rank_eq < k - n_gt))
    pos = tl.where(gt, (csum & 0xFFFF) - 1, n_gt + rank_eq)
    page = tl.load(bt_row + offs // PS, mask=take, other=0)
    tl.store(out_row + pos, page * PS + offs % PS, mask=take)
    o = tl.arange(0, TOPK_BLOCK)
    tl.store(out_row + o, tl.full([TOPK_BLOCK], -1, tl.int32), mask=(o >= k) & (o < TOPK))


@triton.jit
def _fused_kernel(q_ptr, k_ptr, ks_ptr, w_ptr, seq_ptr, bt_ptr, score_ptr, cnt_ptr, hist_ptr, out_ptr,
                  max_pages, n_chunks,
                  stride_qb, stride_qh, stride_wb, stride_btb, stride_sb, stride_hb, stride_ob,
                  TOPK: tl.constexpr, TOPK_BLOCK: tl.constexpr, H: tl.constexpr,
                  D: tl.constexpr, PS: tl.constexpr, ROW_BYTES: tl.constexpr,
                  PPD: tl.constexpr, GPP: tl.constexpr, TILE: tl.constexpr,
                  HIST: tl.constexpr, HIST_BITS: tl.constexpr, IMPRECISE: tl.constexpr,
                  PIVOTS: tl.constexpr):
    """Scoring and top-k in one launch, grid (B, n_chunks).

    Program (b, chunk) scores GPP groups of PPD pages of row b (one FP8 tl.dot per group:
    K [PPD*64 tokens, 128] . q^T [128, 64 heads], one warpgroup per page), writes them to the
    scratch row, then arrives on the row's counter (acq_rel atomic after a CTA barrier).  The
    program that arrives last -- every other program of the row has stored its scores -- resets
    the counter to 0 for the next launch and selects the row's top-k from the scratch row.
    """
    b = tl.program_id(0)
    chunk = tl.program_id(1)
    seq = tl.load(seq_ptr + b)
    seq = tl.minimum(tl.maximum(seq, 0), max_pages * PS)
    n_pages = (seq + PS - 1) // PS
    p_lo = chunk * (GPP * PPD)
    if (seq > TOPK) & (p_lo < n_pages):
        offs_h = tl.arange(0, H)
        offs_d = tl.arange(0, D)
        offs_t = tl.arange(0, PPD * PS)
        q = tl.load(q_ptr + b * stride_qb + offs_h[:, None] * stride_qh + offs_d[None, :])
        qt = tl.trans(q)                                          # [D, H]
        w = tl.load(w_ptr + b * stride_wb + offs_h)
        for i in tl.range(GPP, num_stages=2):
            p = p_lo + i * PPD + offs_t // PS                     # page slot of each token
            in_row = p < n_pages
            page = tl.load(bt_ptr + b * stride_btb + tl.minimum(p, n_pages - 1)).to(tl.int64)
            slot = offs_t % PS
            k = tl.load(k_ptr + page[:, None] * (PS * ROW_BYTES) + slot[:, None] * D
                        + offs_d[None, :])                        # [PPD*PS, D] fp8
            scale = tl.load(ks_ptr + page * (PS * ROW_BYTES // 4) + (PS * D // 4) + slot)
            logits = tl.dot(k, qt, max_num_imprecise_acc=IMPRECISE)  # [PPD*PS, H] fp32 (exact promotion, see above)
            logits = tl.maximum(logits * scale[:, None], 0.0) * w[None, :]
            score = tl.sum(logits, axis=1)
            tok = (p_lo + i * PPD) * PS + offs_t
            score = tl.where(tok < seq, score, float("-inf"))
            tl.store(score_ptr + b * stride_sb + tok, score, mask=in_row)
            if HIST:
                tl.atomic_add(hist_ptr + b * stride_hb + _key_bin(_order_key(score), HIST_BITS), 1,
                              mask=in_row & (tok < seq), sem="relaxed")
    # Every thread's score stores precede the (gpu-scope, release) arrival.
    tl.debug_barrier()
    arrived = tl.atomic_add(cnt_ptr + b, 1, sem="acq_rel")
    if arrived == n_chunks - 1:
        tl.store(cnt_ptr + b, 0)
        _select_resident(score_ptr + b * stride_sb, seq, tl.minimum(seq, TOPK), seq > TOPK,
                         bt_ptr + b * stride_btb, out_ptr + b * stride_ob, hist_ptr + b * stride_hb,
                         TOPK, TOPK_BLOCK, PS, TILE, HIST, HIST_BITS, PIVOTS)


@triton.jit
def _topk_resident_kernel(score_ptr, seq_ptr, bt_ptr, hist_ptr, out_ptr, max_pages,
                          stride_sb, stride_btb, stride_hb, stride_ob,
                          TOPK: tl.constexpr, TOPK_BLOCK: tl.constexpr, PS: tl.constexpr,
                          TILE: tl.constexpr, HIST: tl.constexpr, HIST_BITS: tl.constexpr,
                          PIVOTS: tl.constexpr):
    """Split path, after _score_kernel: the top-k of one row held in registers, grid (B,)."""
    b = tl.program_id(0)
    seq = tl.load(seq_ptr + b)
    seq = tl.minimum(tl.maximum(seq, 0), max_pages * PS)
    _select_resident(score_ptr + b * stride_sb, seq, tl.minimum(seq, TOPK), seq > TOPK,
                     bt_ptr + b * stride_btb, out_ptr + b * stride_ob, hist_ptr + b * stride_hb,
                     TOPK, TOPK_BLOCK, PS, TILE, HIST, HIST_BITS, PIVOTS)


@triton.jit
def _topk_kernel(score_ptr, seq_ptr, bt_ptr, out_ptr, max_pages,
                 stride_sb, stride_btb, stride_ob,
                 TOPK: tl.constexpr, TOPK_BLOCK: tl.constexpr, PS: tl.constexpr,
                 TILE: tl.constexpr):
    """Top-k ids of one row too long to keep in registers (streamed path, after _score_kernel).

    Bisection as in _select_resident, but the row is re-read (from L2) in TILE-token chunks on
    every step.
    """
    b = tl.program_id(0)
    seq = tl.load(seq_ptr + b)
    seq = tl.minimum(tl.maximum(seq, 0), max_pages * PS)
    k = tl.minimum(seq, TOPK)
    scored = seq > TOPK
    row = score_ptr + b * stride_sb
    bt_row = bt_ptr + b * stride_btb
    out_row = out_ptr + b * stride_ob
    INT32_MAX: tl.constexpr = 2147483647
    INT32_MIN: tl.constexpr = -2147483648

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
    c_lo = seq
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
        lo, hi, c_lo, c_hi = _search_step(lo, hi, c_lo, c_hi, cnt, mid, k)
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
    """Streamed path: pages per _score_kernel program."""
    ppp = 1
    while ppp < _MAX_PAGES_PER_PROG and batch * triton.cdiv(max_pages, ppp) > _SCORE_TARGET_PROGRAMS:
        ppp *= 2
    return ppp


def _schedule(batch: int, tile: int) -> str:
    """Which launch structure a row tile takes (measured on the H200, docs/kernels/indexer.md):
    "fused" (one launch) for 4096- and 16384-key tiles; "split" (_score_kernel with 4-warp
    programs + _topk_resident_kernel) for 8192-key tiles, where the fused kernel's 16-warp
    programs (1 per SM) keep fewer pages in flight and measured 0.5-3 us slower at B = 4..64;
    "streamed" beyond _RESIDENT_MAX_TOKENS."""
    if tile > _RESIDENT_MAX_TOKENS:
        return "streamed"
    if tile in _SPLIT_TILES:
        return "split"
    return "fused"


def _fused_config(batch: int, max_pages: int, tile: int):
    """(PPD pages per dot, GPP groups per program, num_warps) of the fused kernel.

    One warpgroup per page of a group: tile 4096 -> 2 pages / 8 warps (16 keys per thread in
    the selection), 16384 -> 4 / 16 (32 keys per thread; 8 pages / 32 warps measured slower).
    Groups are packed per program until the grid is at most ~1 wave of 32 warps per SM.
    """
    ppd = max(1, min(4, tile // 2048))
    num_warps = 4 * ppd
    groups = triton.cdiv(max_pages, ppd)
    target = _FUSED_TARGET_WARPS // num_warps
    gpp = 1
    while gpp < _MAX_GROUPS_PER_PROG and batch * triton.cdiv(groups, gpp) > target:
        gpp *= 2
    return ppd, gpp, num_warps


# ---------------------------------------------------------------------------------------------
# Arrival counters of the fused kernel: one int32 per row, zero between launches (the last
# program of each row resets its own).  Kept per device for the life of the process, never
# freed: a captured graph refers to them by address.

_COUNTER_SLOTS = 1 << 16
_counters = {}


def _arrival_counters(device, batch):
    if device.type != "cuda":
        return torch.zeros(batch, dtype=torch.int32, device=device)
    have = _counters.get(device.index)
    if have is not None and have[-1].numel() >= batch:
        return have[-1]
    if torch.cuda.is_current_stream_capturing():
        # Allocated inside someone else's capture: a zero-fill node of that graph, fresh per replay.
        return torch.zeros(batch, dtype=torch.int32, device=device)
    new = torch.zeros(max(batch, _COUNTER_SLOTS), dtype=torch.int32, device=device)
    _counters.setdefault(device.index, []).append(new)
    return new



def launches(shapes: CallShapes, q_index_fp8, k_fp8, k_scales, weights, seq_lens, block_table,
             topk_indices):
    """The launches of a call whose rows are wider than topk, as ([(kernel, grid, args, meta)],
    [per-call scratch tensors: the scores, fp32 [B, max_pages * PS]]).  k_fp8 / k_scales: the
    K cache as common.k_cache_views gives it."""
    batch, topk, page_size, max_pages = shapes.batch, shapes.topk, shapes.page_size, shapes.max_pages
    topk_block = shapes.topk_block
    dev = q_index_fp8.device
    scores = torch.empty((batch, shapes.tokens), dtype=torch.float32, device=dev)
    tile = triton.next_power_of_2(shapes.tokens)
    schedule = _schedule(batch, tile)
    # the histogram of the resident selects (fused and split): the workspace shared with the
    # long rows, which every kernel leaves zeroed
    use_hist = HIST and batch <= HIST_MAX_BATCH and schedule != "streamed"
    hist = row_workspace(dev, batch).hist if use_hist else scores
    if schedule == "fused":
        ppd, gpp, num_warps = _fused_config(batch, max_pages, tile)
        n_chunks = triton.cdiv(max_pages, ppd * gpp)
        counters = _arrival_counters(dev, batch)
        return [(_fused_kernel, (batch, n_chunks), (
            q_index_fp8, k_fp8, k_scales, weights, seq_lens, block_table, scores, counters, hist,
            topk_indices, max_pages, n_chunks,
            q_index_fp8.stride(0), q_index_fp8.stride(1), weights.stride(0),
            block_table.stride(0), scores.stride(0), hist.stride(0), topk_indices.stride(0)),
            dict(TOPK=topk, TOPK_BLOCK=topk_block, H=shapes.heads, D=shapes.head_dim, PS=page_size,
                 ROW_BYTES=shapes.row_bytes, PPD=ppd, GPP=gpp, TILE=tile, HIST=use_hist, HIST_BITS=HIST_BITS,
                 IMPRECISE=IMPRECISE_ACC, PIVOTS=SELECT_PIVOTS, num_warps=num_warps, num_stages=2))], [scores]
    ppp = _pages_per_prog(batch, max_pages)
    split = schedule == "split"
    score = (_score_kernel, (batch, triton.cdiv(max_pages, ppp)), (
        q_index_fp8, k_fp8, k_scales, weights, seq_lens, block_table, scores, hist,
        max_pages,
        q_index_fp8.stride(0), q_index_fp8.stride(1), weights.stride(0),
        block_table.stride(0), scores.stride(0), hist.stride(0)),
        dict(TOPK=topk, H=shapes.heads, D=shapes.head_dim, PS=page_size, ROW_BYTES=shapes.row_bytes,
             PAGES_PER_PROG=ppp, HIST=use_hist, HIST_BITS=HIST_BITS, IMPRECISE=IMPRECISE_ACC,
             num_warps=4, num_stages=3))
    if split:
        select = (_topk_resident_kernel, (batch,), (
            scores, seq_lens, block_table, hist, topk_indices, max_pages,
            scores.stride(0), block_table.stride(0), hist.stride(0), topk_indices.stride(0)),
                  dict(TOPK=topk, TOPK_BLOCK=topk_block, PS=page_size, TILE=tile,
                       HIST=use_hist, HIST_BITS=HIST_BITS, PIVOTS=SELECT_PIVOTS, num_warps=_SPLIT_TOPK_WARPS))
    else:
        chunk = _CHUNK_TOKENS
        assert chunk < 65536  # the packed cumsum keeps each rank in 16 bits
        topk_args = (scores, seq_lens, block_table, topk_indices, max_pages,
                     scores.stride(0), block_table.stride(0), topk_indices.stride(0))
        select = (_topk_kernel, (batch,), topk_args,
                  dict(TOPK=topk, TOPK_BLOCK=topk_block, PS=page_size, TILE=chunk, num_warps=16))
    return [score, select], [scores]
