"""What both paths of the indexer share: the call's shapes and layout checks, the
order-preserving key, the histogram bins and the k-th key search, and the all-selected kernel (rows no wider than topk,
whichever path the width would take).

Loops whose trip count depends on device data are `while` loops (the Triton interpreter cannot
take a tensor or a runtime scalar as a `range` bound); everything else has static trip counts.
"""

from typing import NamedTuple

import torch
import triton
import triton.language as tl


class CallShapes(NamedTuple):
    """The shapes of one call (every launch decision is made from these, never from values)."""
    batch: int        # B, rows of q_index_fp8 / block_table / topk_indices
    heads: int        # H = 64
    head_dim: int     # D = 128
    page_size: int    # PS = 64 tokens per page
    row_bytes: int    # D + 4: FP8 bytes of one token, then (per page, after all of them) its fp32 scale
    max_pages: int    # block_table.shape[1]: the width of every row, in pages
    topk: int         # topk_indices.shape[1] = 2048

    @property
    def tokens(self) -> int:
        """Row width in tokens: max_pages * page_size."""
        return self.max_pages * self.page_size

    @property
    def topk_block(self) -> int:
        return triton.next_power_of_2(self.topk)


def call_shapes(q_index_fp8, k_index_cache_fp8, weights, block_table, topk_indices) -> CallShapes:
    """The CallShapes of a call: q_index_fp8 [B, H, D] float8_e4m3fn, k_index_cache_fp8
    [P, PS, 1, D + 4] int8 (contiguous), weights [B, H] fp32, block_table [B, max_pages] int32,
    topk_indices [B, topk] int32.  Raises AssertionError on a layout the kernels do not support
    (non-contiguous K cache, strided inner dimensions)."""
    batch, heads, head_dim = q_index_fp8.shape
    shapes = CallShapes(batch, heads, head_dim, k_index_cache_fp8.shape[1], k_index_cache_fp8.shape[-1],
                        block_table.shape[1], topk_indices.shape[1])
    assert shapes.row_bytes == head_dim + 4 and (shapes.page_size * shapes.row_bytes) % 4 == 0
    assert k_index_cache_fp8.is_contiguous() and q_index_fp8.stride(2) == 1
    assert topk_indices.stride(1) == 1 and block_table.stride(1) == 1 and weights.stride(1) == 1
    return shapes


def k_cache_views(k_index_cache_fp8):
    """The K cache's bytes as (FP8 values [P, PS, 1, D + 4], fp32 words [P, PS, 1, (D + 4) / 4]):
    page p's token t has its FP8 row at byte p*PS*(D+4) + t*D and its scale at fp32 word
    p*PS*(D+4)/4 + PS*D/4 + t."""
    return k_index_cache_fp8.view(torch.float8_e4m3fn), k_index_cache_fp8.view(torch.float32)


@triton.jit
def _order_key(x):
    """fp32 -> int32 with the same order (signed compare); NaN sorts above +inf."""
    bits = x.to(tl.int32, bitcast=True)
    return tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)


# Histogram bins: the top HIST_BITS bits of each score's order key (sign, 8 exponent bits and
# 2 mantissa bits at 11: bins 1/4 octave wide).
HIST_BITS = 11
# Histogram copies per row in the shared workspace (the long rows spread a wide row's counts over
# up to this many copies).
HIST_COPIES = 4


@triton.jit
def _key_bin(key, HIST_BITS: tl.constexpr):
    """Order key -> histogram bin in [0, 2**HIST_BITS), monotone in the key."""
    return (key >> (32 - HIST_BITS)) + (1 << (HIST_BITS - 1))


@triton.jit
def _bin_bounds(thr, HIST_BITS: tl.constexpr):
    """The order keys of bin ``thr``: [lo, hi) as int64 (hi may be 2**31)."""
    lo = (thr - (1 << (HIST_BITS - 1))).to(tl.int64) << (32 - HIST_BITS)
    return lo, lo + (1 << (32 - HIST_BITS))


@triton.jit
def _zero_histogram(hist_row, stripes, HIST_BITS: tl.constexpr, MAX_STRIPES: tl.constexpr):
    """Zeroes a row's `stripes` (<= MAX_STRIPES) histogram copies for the next call."""
    NB: tl.constexpr = 1 << HIST_BITS
    offs = tl.arange(0, NB)
    for s in tl.static_range(MAX_STRIPES):
        tl.store(hist_row + s * NB + offs, tl.zeros([NB], dtype=tl.int32),
                 mask=(offs < NB) & (s < stripes))


@triton.jit
def _threshold_bin(hist_row, stripes, k, HIST_BITS: tl.constexpr, MAX_STRIPES: tl.constexpr,
                   ZERO: tl.constexpr):
    """Sums a row's `stripes` (<= MAX_STRIPES) histogram copies (ZERO: and zeroes them for the
    next call); returns (T, above, inside): T the highest bin with count(bin >= T) >= k,
    `above` the count in bins > T (< k), `inside` the count in bin T."""
    NB: tl.constexpr = 1 << HIST_BITS
    offs = tl.arange(0, NB)
    h = tl.zeros([NB], dtype=tl.int32)
    # Unrolled over MAX_STRIPES with masks, so that the copies' loads are in flight together.
    for s in tl.static_range(MAX_STRIPES):
        # .cg: counted by atomics of other programs (at L2).
        h += tl.load(hist_row + s * NB + offs, mask=(offs < NB) & (s < stripes), other=0,
                     cache_modifier=".cg")
    if ZERO:
        _zero_histogram(hist_row, stripes, HIST_BITS, MAX_STRIPES)
    at_or_above = tl.sum(h, axis=0) - tl.cumsum(h, axis=0) + h
    thr = tl.max(tl.where(at_or_above >= k, offs, -1), axis=0)
    above = tl.sum(tl.where(offs > thr, h, 0), axis=0)
    inside = tl.sum(tl.where(offs == thr, h, 0), axis=0)
    return thr, above, inside


@triton.jit
def _search_step(lo, hi, c_lo, c_hi, cnt, mid, k):
    """One step of the search for the k-th largest key on cnt = count(key >= mid), lo < mid < hi.

    Invariants: c_lo = count(key >= lo) >= k, c_hi = count(key >= hi) < k (or hi = lo + 1
    after an exact hit).  An exact hit (cnt == k) ends the search: lo = mid - 1, hi = mid, so
    that 'key > lo' selects exactly k keys and no ties are needed.
    """
    ge = cnt >= k
    exact = cnt == k
    new_lo = tl.where(exact, mid - 1, tl.where(ge, mid, lo))
    new_hi = tl.where(ge & (~exact), hi, mid)
    new_c_lo = tl.where(ge, cnt, c_lo)
    new_c_hi = tl.where(ge & (~exact), c_hi, cnt)
    return new_lo, new_hi, new_c_lo, new_c_hi


@triton.jit
def _next_pivot(lo, hi, c_lo, c_hi, k, interpolate):
    """The next pivot in (lo, hi): where a straight line through (lo, c_lo), (hi, c_hi) crosses
    k - 1/2 (interpolate), else the midpoint."""
    w = hi - lo
    guess = lo + (w * (2 * (c_lo - k) + 1)) // (2 * (c_lo - c_hi)).to(tl.int64)
    mid = tl.where(interpolate, guess, lo + w // 2)
    return tl.minimum(tl.maximum(mid, lo + 1), hi - 1)


@triton.jit
def _kth_key_single(key, valid, lo, hi, c_lo, c_hi, k, INTERPOLATE: tl.constexpr):
    """_kth_key with one pivot per step.

    INTERPOLATE: the pivots alternate between the count line's crossing (_next_pivot) and the
    midpoint whenever a crossing step did not halve the interval -- 3-6 steps within one
    histogram bin of the definition's scores against 5-9 for bisection, 15-20 over a whole row
    (CPU simulation on the definition's inputs, docs/kernels/indexer.md); else bisection.
    """
    interp = tl.full([], INTERPOLATE, tl.int1)
    while hi - lo > 1:
        mid = _next_pivot(lo, hi, c_lo, c_hi, k, interp)
        cnt = tl.sum((valid & (key >= mid.to(tl.int32))).to(tl.int32), axis=0)
        w = hi - lo
        lo, hi, c_lo, c_hi = _search_step(lo, hi, c_lo, c_hi, cnt, mid, k)
        if INTERPOLATE:
            interp = (~interp) | (2 * (hi - lo) <= w)
    return lo.to(tl.int32), c_hi


@triton.jit
def _key_float(key):
    """Order key (int32 or int64 in the int32 range) -> the fp32 it orders (inverse of _order_key)."""
    k32 = key.to(tl.int32)
    return tl.where(k32 < 0, k32 ^ 0x7FFFFFFF, k32).to(tl.float32, bitcast=True)


@triton.jit
def _pivot(f_lo, f_hi, lo, hi, c_lo, c_hi, k, SIDE: tl.constexpr, SPREAD: tl.constexpr):
    """A pivot in (lo, hi) where the straight line through (f_lo, c_lo) and (f_hi, c_hi) -- in
    score space -- crosses the count k - 1/2 + SIDE * SPREAD * (c_lo - c_hi) (SIDE in [-1, 1])."""
    n = (c_lo - c_hi).to(tl.float32)
    target = (k.to(tl.float32) - 0.5) + tl.maximum(SPREAD * n, 1.0) * SIDE
    target = tl.minimum(tl.maximum(target, c_hi.to(tl.float32) + 0.5), c_lo.to(tl.float32) - 0.5)
    guess = f_lo + (f_hi - f_lo) * ((c_lo.to(tl.float32) - target) / n)
    return tl.minimum(tl.maximum(_order_key(guess).to(tl.int64), lo + 1), hi - 1)


@triton.jit
def _narrow(lo, hi, c_lo, c_hi, exact, mid, cnt, k):
    """The bracket after one more counted pivot (cnt = count(key >= mid)), pivots taken in any
    order; `exact`: the lowest pivot so far with a count of exactly k (or 2**40)."""
    ge = cnt >= k
    up = ge & (mid > lo)
    down = (~ge) & (mid < hi)
    return (tl.where(up, mid, lo), tl.where(down, mid, hi), tl.where(up, cnt, c_lo),
            tl.where(down, cnt, c_hi), tl.where(cnt == k, tl.minimum(exact, mid), exact))


@triton.jit
def _kth_key_multi(key, valid, lo, hi, c_lo, c_hi, k, PIVOTS: tl.constexpr, SPREAD: tl.constexpr):
    """_kth_key with PIVOTS (2-4) pivots per step, counted in one block-wide reduction: each
    key adds 1 << (16 * i) for every pivot i it reaches into one int64 (counts < 2**16: at most
    16384 keys), so a step costs one scalar reduction, as a one-pivot step does.

    The pivots sit where the straight line through (float(lo), c_lo) and (float(hi - 1), c_hi)
    -- in score space, not key space: the scores' count is smooth in their value, not in their
    bits -- crosses the counts k - 1/2 +- SPREAD * (c_lo - c_hi), spread evenly; the new bracket
    is the tightest pair of pivots around the k-th key.  CPU simulation on the definition's
    scores (rows of 3K-16K tokens, from [min key, max key + 1]): 4-5 steps with 4 pivots and
    SPREAD 0.1, 6 with 2 and 0.06, against 16-18 for bisection (docs/kernels/indexer.md).
    Any pivot in (lo, hi) keeps the invariants, so the result is exact whatever the scores.
    """
    FAR: tl.constexpr = 1 << 40
    # invalid keys below every pivot (pivots are > lo >= INT32_MIN)
    key = tl.where(valid, key, -2147483648)
    SIDE1: tl.constexpr = 2.0 / (PIVOTS - 1) - 1.0
    SIDE2: tl.constexpr = 4.0 / (PIVOTS - 1) - 1.0
    while hi - lo > 1:
        f_lo = _key_float(lo)
        f_hi = _key_float(hi - 1)
        m0 = _pivot(f_lo, f_hi, lo, hi, c_lo, c_hi, k, -1.0, SPREAD)
        m1 = _pivot(f_lo, f_hi, lo, hi, c_lo, c_hi, k, SIDE1, SPREAD)
        packed = (key >= m0.to(tl.int32)).to(tl.int64) + ((key >= m1.to(tl.int32)).to(tl.int64) << 16)
        if PIVOTS > 2:
            m2 = _pivot(f_lo, f_hi, lo, hi, c_lo, c_hi, k, SIDE2, SPREAD)
            packed += (key >= m2.to(tl.int32)).to(tl.int64) << 32
        if PIVOTS > 3:
            m3 = _pivot(f_lo, f_hi, lo, hi, c_lo, c_hi, k, 1.0, SPREAD)
            packed += (key >= m3.to(tl.int32)).to(tl.int64) << 48
        counts = tl.sum(packed, axis=0)
        exact = tl.full([], FAR, tl.int64)
        lo, hi, c_lo, c_hi, exact = _narrow(lo, hi, c_lo, c_hi, exact, m0, (counts & 0xFFFF).to(tl.int32), k)
        lo, hi, c_lo, c_hi, exact = _narrow(lo, hi, c_lo, c_hi, exact, m1, ((counts >> 16) & 0xFFFF).to(tl.int32), k)
        if PIVOTS > 2:
            lo, hi, c_lo, c_hi, exact = _narrow(lo, hi, c_lo, c_hi, exact, m2, ((counts >> 32) & 0xFFFF).to(tl.int32), k)
        if PIVOTS > 3:
            lo, hi, c_lo, c_hi, exact = _narrow(lo, hi, c_lo, c_hi, exact, m3, ((counts >> 48) & 0xFFFF).to(tl.int32), k)
        # an exact count ends the search as in _search_step: 'key > exact - 1' selects k keys
        hit_k = exact < FAR
        lo = tl.where(hit_k, exact - 1, lo)
        hi = tl.where(hit_k, exact, hi)
        c_hi = tl.where(hit_k, k, c_hi)
    return lo.to(tl.int32), c_hi


@triton.jit
def _kth_key(key, valid, lo, hi, c_lo, c_hi, k, INTERPOLATE: tl.constexpr, PIVOTS: tl.constexpr):
    """The k-th largest of the valid int32 ``key``s (held in registers), searched in [lo, hi)
    (int64) with c_lo = count(key >= lo) >= k and c_hi = count(key >= hi) < k.  Returns
    (T, c_gt): T with count(key > T) = c_gt < k <= count(key >= T) (T = the k-th largest, or one
    below it after an exact hit), in one block-wide count per step.

    PIVOTS: 1 -> one pivot per step (_kth_key_single: the count line in key space if INTERPOLATE,
    else bisection); 2-4 -> that many per step in score space (_kth_key_multi, INTERPOLATE
    ignored; the spread of its pivots from the CPU simulation: 0.06 for 2, 0.1 for 3-4).
    """
    if PIVOTS > 1:
        t32, c_gt = _kth_key_multi(key, valid, lo, hi, c_lo, c_hi, k, PIVOTS, 0.06 if PIVOTS == 2 else 0.1)
    else:
        t32, c_gt = _kth_key_single(key, valid, lo, hi, c_lo, c_hi, k, INTERPOLATE)
    return t32, c_gt


@triton.jit
def _all_selected_kernel(seq_ptr, bt_ptr, out_ptr, max_pages, stride_btb, stride_ob,
                         TOPK: tl.constexpr, TOPK_BLOCK: tl.constexpr, PS: tl.constexpr):
    """max_pages * PS <= topk: ids of tokens 0..seq_len-1 in order, then -1, grid (B,).

    Written out rather than through long_rows._write_all_selected (the same per row): with the
    row pointers formed first, ptxas gets a different and longer program (sm_90a, offline); this
    is the kernel measured at 3.8-4.5 us on the contest's all-selected workloads."""
    b = tl.program_id(0)
    seq = tl.load(seq_ptr + b)
    seq = tl.minimum(tl.maximum(seq, 0), max_pages * PS)
    offs = tl.arange(0, TOPK_BLOCK)
    valid = offs < seq
    page = tl.load(bt_ptr + b * stride_btb + offs // PS, mask=valid, other=0)
    ids = tl.where(valid, page * PS + offs % PS, -1)
    tl.store(out_ptr + b * stride_ob + offs, ids, mask=offs < TOPK)


def all_selected_launches(shapes: CallShapes, seq_lens, block_table, topk_indices):
    """The one launch of a call whose rows are no wider than topk (max_pages * PS <= topk), as
    [(kernel, grid, args, meta)]: every valid token selected in order, -1 after seq_len."""
    return [(_all_selected_kernel, (shapes.batch,), (
        seq_lens, block_table, topk_indices, shapes.max_pages,
        block_table.stride(0), topk_indices.stride(0)),
        dict(TOPK=shapes.topk, TOPK_BLOCK=shapes.topk_block, PS=shapes.page_size, num_warps=4))]


# ---------------------------------------------------------------------------------------------
# Per-row state shared by the calls on one device (both paths).

class Workspace(NamedTuple):
    """Per-row state shared by every call on one device, all zero between calls (state aside):
    hist [rows, >= HIST_COPIES << HIST_BITS] int32, arrive [2, rows] int32 (arrival counters),
    cursor [rows] int64 (packed output / candidate slots), state [rows, 4] int32 (a row's
    threshold bin and counts, passed between two launches; not reset)."""
    hist: torch.Tensor
    arrive: torch.Tensor
    cursor: torch.Tensor
    state: torch.Tensor

    @property
    def rows(self) -> int:
        return self.cursor.numel()


_MIN_WORKSPACE_ROWS = 64
_workspaces = {}


def _new_workspace(device, rows, hist_words):
    return Workspace(torch.zeros((rows, hist_words), dtype=torch.int32, device=device),
                     torch.zeros((2, rows), dtype=torch.int32, device=device),
                     torch.zeros(rows, dtype=torch.int64, device=device),
                     torch.zeros((rows, 4), dtype=torch.int32, device=device))


def row_workspace(device, batch, hist_words=HIST_COPIES << HIST_BITS) -> Workspace:
    """The device's workspace with room for `batch` rows of `hist_words` histogram counters.
    Kept for the life of the process and never freed (a captured graph refers to it by
    address); a larger batch allocates a larger one beside it.  Asked for inside someone else's
    capture with too small a workspace, returns a fresh zeroed one (zero-fill nodes of that
    graph, fresh on every replay).  Every kernel that uses it leaves it zeroed (each row's last
    arriver resets what its row used)."""
    key = (device.type, device.index)
    have = _workspaces.get(key)
    if have is not None and have[-1].rows >= batch and have[-1].hist.shape[1] >= hist_words:
        return have[-1]
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return _new_workspace(device, batch, hist_words)
    new = _new_workspace(device, max(batch, _MIN_WORKSPACE_ROWS), hist_words)
    _workspaces.setdefault(key, []).append(new)
    return new
