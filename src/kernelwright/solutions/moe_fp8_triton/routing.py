"""DeepSeek-V3 no-aux routing and the bucketing of (token, local expert) pairs, on the GPU.

No host synchronisation: per-expert counts come from atomics in the routing kernel (which also
hands each local pair its slot inside its expert), the align kernel turns the final counts into
the BLOCK_M-padded segments (one cumsum of 32 numbers per program), and grids are sized from
shapes only (upper bounds; surplus programs exit at once).

Row layout shared by every kernel of one call (BLOCK_M fixed per call):
  expert e (local id) owns padded rows [BLOCK_M * sum_{e'<e} ceil(cnt[e']/BLOCK_M), ...),
  its pairs sit at row start(e) + slot, where slot is the value the routing kernel's atomic
  counter returned; rows past cnt[e] inside the last block of a segment are padding.
The order of pairs inside a segment is whatever the atomics gave, which is harmless: every row
of a GEMM tile is computed independently of the other rows, and the final reduce sums each
token's rows in top-k order, so the output is bitwise deterministic.

Routing kernel: every arg-max is ONE integer max over packed keys
  key = (order-preserving int32 of the fp32 score) << 32 | (index complement)
so the largest score wins and, among equal scores, the lowest index (one reduction per pick
instead of a max and an arg-min); the top-4 groups come from one rank count over the 8x8
group comparisons.  12 reductions per token instead of 28, and at one warp per program none of
them crosses warps (no shared memory, no barriers).
"""

import torch
import triton
import triton.language as tl

_KEY_MIN = tl.constexpr(-9223372036854775807 - 1)   # int64 min: below every packed key


@triton.jit(do_not_specialize=["T", "local_offset"])
def _routing_kernel(
    logits_ptr, bias_ptr, ids_ptr, weights_ptr, slots_ptr, counts_ptr, out_ptr,
    T, local_offset, scaling,
    NUM_EXPERTS: tl.constexpr, N_GROUP: tl.constexpr, TOPK_GROUP: tl.constexpr,
    TOP_K: tl.constexpr, NUM_LOCAL: tl.constexpr, BLOCK_T: tl.constexpr,
    OUT_H: tl.constexpr, ZERO_OUT: tl.constexpr,
):
    """BLOCK_T tokens per program: ids/weights/slots [T, TOP_K]; counts[local] += hits.
    ZERO_OUT: also zero the tokens' output rows [T, OUT_H] (GEMM2 then accumulates into them
    with atomics)."""
    GROUP_SIZE: tl.constexpr = NUM_EXPERTS // N_GROUP
    pid = tl.program_id(0)
    offs_t = pid * BLOCK_T + tl.arange(0, BLOCK_T)
    t_ok = offs_t < T
    row_base = logits_ptr + offs_t.to(tl.int64) * NUM_EXPERTS

    # biased scores [BT, G, S], packed with the expert's complement index (31 - j)
    g = tl.arange(0, N_GROUP)
    j = tl.arange(0, GROUP_SIZE)
    e3 = g[:, None] * GROUP_SIZE + j[None, :]                       # [G, S] expert ids
    x3 = tl.load(row_base[:, None, None] + e3[None, :, :], mask=t_ok[:, None, None],
                 other=0.0).to(tl.float32)
    b3 = 1.0 / (1.0 + tl.exp(-x3)) + tl.load(bias_ptr + e3).to(tl.float32)[None, :, :]
    bits3 = b3.to(tl.int32, bitcast=True)                           # order-preserving int32:
    hi3 = tl.where(bits3 >= 0, bits3, bits3 ^ 0x7FFFFFFF).to(tl.int64) << 32   # flip negatives
    key3 = hi3 | (NUM_EXPERTS - 1 - e3).to(tl.int64)[None, :, :]     # unique per expert

    # group score = sum of the group's top-2 biased scores (one occurrence of the max removed)
    k1 = tl.max(key3, axis=2)                                       # [BT, G]
    k2 = tl.max(tl.where(key3 == k1[:, :, None], _KEY_MIN, key3), axis=2)
    o1 = (k1 >> 32).to(tl.int32)                                    # back to fp32 (involution)
    o2 = (k2 >> 32).to(tl.int32)
    gscore = (tl.where(o1 >= 0, o1, o1 ^ 0x7FFFFFFF).to(tl.float32, bitcast=True)
              + tl.where(o2 >= 0, o2, o2 ^ 0x7FFFFFFF).to(tl.float32, bitcast=True))

    # keep the TOPK_GROUP best groups (ties: lowest group index): rank by counting
    gi = g[None, :, None]
    gk = g[None, None, :]
    ga = gscore[:, :, None]
    gb = gscore[:, None, :]
    beats = (gb > ga) | ((gb == ga) & (gk < gi))                    # [BT, G(self), G(other)]
    rank = tl.sum(beats.to(tl.int32), axis=2)                       # [BT, G]
    kept = rank < TOPK_GROUP

    # top-TOP_K experts inside the kept groups (ties: lowest expert id)
    cand = tl.reshape(tl.where(kept[:, :, None], key3, _KEY_MIN), [BLOCK_T, NUM_EXPERTS])
    kk = tl.arange(0, TOP_K)[None, :]                                # [1, K]
    ids = tl.zeros([BLOCK_T, TOP_K], dtype=tl.int32)
    for k in tl.static_range(TOP_K):
        best = tl.max(cand, axis=1)                                  # [BT]
        sel = (NUM_EXPERTS - 1) - (best & 0x7FFFFFFF).to(tl.int32)
        cand = tl.where(cand == best[:, None], _KEY_MIN, cand)
        ids = tl.where(kk == k, sel[:, None], ids)

    # weights: unbiased sigmoid of the selected, normalised (+1e-20), times the scaling factor
    sel_x = tl.load(row_base[:, None] + ids, mask=t_ok[:, None], other=0.0).to(tl.float32)
    sel_s = 1.0 / (1.0 + tl.exp(-sel_x))
    denom = tl.sum(sel_s, axis=1) + 1e-20
    w = sel_s / denom[:, None] * scaling

    loc = ids - local_offset
    is_loc = (loc >= 0) & (loc < NUM_LOCAL) & t_ok[:, None]
    slot = tl.atomic_add(counts_ptr + loc, 1, mask=is_loc, sem="relaxed")
    slot = tl.where(is_loc, slot, -1)

    out = offs_t[:, None] * TOP_K + kk
    st_mask = t_ok[:, None] & (kk < TOP_K)
    tl.store(ids_ptr + out, ids, mask=st_mask)
    tl.store(weights_ptr + out, w, mask=st_mask)
    tl.store(slots_ptr + out, slot, mask=st_mask)

    if ZERO_OUT:
        ZH: tl.constexpr = 1024
        offs_h = tl.arange(0, ZH)
        o_row = out_ptr + offs_t.to(tl.int64)[:, None] * OUT_H
        for h0 in tl.static_range(0, OUT_H, ZH):
            tl.store(o_row + h0 + offs_h[None, :],
                     tl.zeros([BLOCK_T, ZH], dtype=out_ptr.dtype.element_ty),
                     mask=t_ok[:, None] & (h0 + offs_h[None, :] < OUT_H))


@triton.jit(do_not_specialize=["num_pairs", "num_blocks", "local_offset"])
def _align_kernel(
    ids_ptr, slots_ptr, counts_ptr, sorted_ptr, pair_row_ptr, block_expert_ptr, block_rows_ptr,
    num_pairs, num_blocks, local_offset,
    NUM_LOCAL: tl.constexpr, NUM_LOCAL_P2: tl.constexpr, BLOCK_M: tl.constexpr,
    BLOCK_P: tl.constexpr,
):
    """From the final counts: pair_row[p] = padded row of pair p (-1: not local),
    sorted[row] = p, and per M-block b < num_blocks: block_expert[b] (-1: unused) and
    block_rows[b] = its valid rows.  Program i covers pairs and blocks [i*BLOCK_P, +BLOCK_P)."""
    pid = tl.program_id(0)
    e = tl.arange(0, NUM_LOCAL_P2)[None, :]                        # [1, E_loc]
    cnt = tl.load(counts_ptr + e, mask=e < NUM_LOCAL, other=0)
    nblk = (cnt + BLOCK_M - 1) // BLOCK_M
    end_blk = tl.cumsum(nblk, axis=1)
    first_blk = end_blk - nblk                                     # exclusive prefix, [1, E_loc]

    offs = pid * BLOCK_P + tl.arange(0, BLOCK_P)
    ok = offs < num_pairs
    ids = tl.load(ids_ptr + offs, mask=ok, other=-1)
    slot = tl.load(slots_ptr + offs, mask=ok, other=0)
    loc = ids - local_offset
    is_loc = ok & (loc >= 0) & (loc < NUM_LOCAL)
    row = tl.sum(tl.where(e == loc[:, None], first_blk, 0), axis=1) * BLOCK_M + slot
    tl.store(sorted_ptr + row, offs, mask=is_loc)
    tl.store(pair_row_ptr + offs, tl.where(is_loc, row, -1), mask=ok)

    blk = offs[:, None]                                            # this program's blocks
    be = tl.sum((end_blk <= blk).to(tl.int32), axis=1)             # owning expert; >= E_loc: unused
    onehot = e == be[:, None]
    be_first = tl.sum(tl.where(onehot, first_blk, 0), axis=1)
    be_cnt = tl.sum(tl.where(onehot, cnt, 0), axis=1)
    used = be < NUM_LOCAL
    valid = tl.minimum(be_cnt - (offs - be_first) * BLOCK_M, BLOCK_M)
    b_ok = offs < num_blocks
    tl.store(block_expert_ptr + offs, tl.where(used, be, -1), mask=b_ok)
    tl.store(block_rows_ptr + offs, tl.where(used, valid, 0), mask=b_ok)


TOP_K = 8
N_GROUP = 8
TOPK_GROUP = 4


def max_m_blocks(num_tokens: int, num_local: int, block_m: int) -> int:
    """Upper bound (from shapes only) on the M-blocks the padded expert segments can use.

    Each token has at most min(TOP_K, num_local) local pairs and at most one per expert, so
    sum_e ceil(cnt_e / BM) <= min(num_local * ceil(T/BM), (P + min(num_local, P) * (BM-1)) // BM)
    with P = T * min(TOP_K, num_local) the most local pairs.
    """
    pairs = num_tokens * min(TOP_K, num_local)
    return max(1, min(num_local * triton.cdiv(num_tokens, block_m),
                      (pairs + min(num_local, pairs) * (block_m - 1)) // block_m))


def route(routing_logits, routing_bias, local_expert_offset, routed_scaling_factor, num_local,
          block_t=1, num_warps=1, zero_out=None):
    """Launch the routing kernel.  Returns (topk_ids [T,8] int32 global ids, topk_weights [T,8]
    fp32, slots [T,8] int32 (-1 where the expert is not local), counts [num_local] int32).
    ``zero_out``: a [T, H] tensor the kernel also zeroes (or None)."""
    T, E = routing_logits.shape
    dev = routing_logits.device
    ids = torch.empty((T, TOP_K), dtype=torch.int32, device=dev)
    weights = torch.empty((T, TOP_K), dtype=torch.float32, device=dev)
    slots = torch.empty((T, TOP_K), dtype=torch.int32, device=dev)
    counts = torch.zeros((num_local,), dtype=torch.int32, device=dev)
    _routing_kernel[(triton.cdiv(T, block_t),)](
        routing_logits, routing_bias, ids, weights, slots, counts,
        ids if zero_out is None else zero_out,
        T, int(local_expert_offset), float(routed_scaling_factor),
        NUM_EXPERTS=E, N_GROUP=N_GROUP, TOPK_GROUP=TOPK_GROUP, TOP_K=TOP_K,
        NUM_LOCAL=num_local, BLOCK_T=block_t,
        OUT_H=1 if zero_out is None else zero_out.shape[1], ZERO_OUT=zero_out is not None,
        num_warps=num_warps, num_stages=1,
    )
    return ids, weights, slots, counts


def align(ids, slots, counts, local_expert_offset, num_local, block_m, block_p=256):
    """Launch the align kernel.  Returns (sorted_pairs [MB*BM] int32, pair_row [T*8] int32,
    block_expert [MB] int32, block_rows [MB] int32, MB) with MB = max_m_blocks(T) from shapes.
    Padding rows of sorted_pairs are left unwritten (block_rows masks them)."""
    T = ids.shape[0]
    nblocks = max_m_blocks(T, num_local, block_m)
    dev = ids.device
    sorted_pairs = torch.empty((nblocks * block_m,), dtype=torch.int32, device=dev)
    pair_row = torch.empty((T * TOP_K,), dtype=torch.int32, device=dev)
    block_expert = torch.empty((nblocks,), dtype=torch.int32, device=dev)
    block_rows = torch.empty((nblocks,), dtype=torch.int32, device=dev)
    num_pairs = T * TOP_K
    grid = (triton.cdiv(max(num_pairs, nblocks), block_p),)
    _align_kernel[grid](
        ids, slots, counts, sorted_pairs, pair_row, block_expert, block_rows,
        num_pairs, nblocks, int(local_expert_offset),
        NUM_LOCAL=num_local, NUM_LOCAL_P2=triton.next_power_of_2(num_local), BLOCK_M=block_m,
        BLOCK_P=block_p, num_warps=4, num_stages=1,
    )
    return sorted_pairs, pair_row, block_expert, block_rows, nblocks
