"""Triton glue around DeepGEMM's masked grouped GEMMs: DeepSeek-V3 routing (fallback when
FlashInfer is absent), token scatter into the masked layout, SwiGLU + 1x128 FP8 quantisation,
and the routing-weighted combine.  Every kernel runs on the GPU with no host synchronisation;
each has a thin launcher taking torch tensors.

Layouts (E = local experts, M = max_m rows per expert, H = hidden, I = intermediate):
  a1   [E, M, H]   fp8     GEMM1 activations, rows [0, counts[e]) valid
  sfa1 [E, H/128, M] fp32  their 1x128 scales, stored MN-major: ``sfa1.transpose(1, 2)`` is the
                           [E, M, H/128] tensor DeepGEMM wants (TMA-aligned, no transpose kernel)
  d1   [E, M, 2I]  bf16    GEMM1 output: columns [0, I) up, [I, 2I) gate
  a2   [E, M, I]   fp8,  sfa2 [E, I/128, M] fp32   GEMM2 activations
  d2   [E, M, H]   bf16    GEMM2 output
  pair_pos [T, 8] int32    e * M + row of each (token, k) pair, -1 when the expert is not local
"""

import torch
import triton
import triton.language as tl

TOP_K = 8
N_GROUP = 8
TOPK_GROUP = 4
FP8_MAX = 448.0


@triton.jit
def _routing_kernel(logits_ptr, bias_ptr, idx_ptr, w_ptr, scaling,
                    N_EXP: tl.constexpr, N_GROUP: tl.constexpr, TOPK_GROUP: tl.constexpr,
                    TOP_K: tl.constexpr):
    """One program per token: sigmoid, + bias, group score = sum of the group's top-2, keep the
    top TOPK_GROUP groups, top TOP_K experts of the biased score there, weights = unbiased
    sigmoid normalised over the selection times ``scaling``."""
    t = tl.program_id(0).to(tl.int64)
    GS: tl.constexpr = N_EXP // N_GROUP
    offs = tl.arange(0, N_EXP)
    x = tl.load(logits_ptr + t * N_EXP + offs).to(tl.float32)
    s = tl.sigmoid(x)
    b = s + tl.load(bias_ptr + offs).to(tl.float32)
    neg = float("-inf")
    bg = tl.reshape(b, (N_GROUP, GS))
    col = tl.arange(0, GS)[None, :]
    first = tl.argmax(bg, axis=1)
    m1 = tl.max(bg, axis=1)
    m2 = tl.max(tl.where(col == first[:, None], neg, bg), axis=1)
    gscore = m1 + m2
    gid = tl.arange(0, N_GROUP)
    keep = tl.zeros([N_GROUP], dtype=tl.int32)
    for _ in tl.static_range(TOPK_GROUP):
        g = tl.argmax(gscore, axis=0)
        keep = tl.where(gid == g, 1, keep)
        gscore = tl.where(gid == g, neg, gscore)
    keep_e = tl.reshape(tl.broadcast_to(keep[:, None], (N_GROUP, GS)), (N_EXP,))
    pruned = tl.where(keep_e != 0, b, neg)
    kk = tl.arange(0, TOP_K)
    sel_idx = tl.zeros([TOP_K], dtype=tl.int32)
    sel_s = tl.zeros([TOP_K], dtype=tl.float32)
    for k in tl.static_range(TOP_K):
        e = tl.argmax(pruned, axis=0)
        se = tl.sum(tl.where(offs == e, s, 0.0), axis=0)
        sel_idx = tl.where(kk == k, e, sel_idx)
        sel_s = tl.where(kk == k, se, sel_s)
        pruned = tl.where(offs == e, neg, pruned)
    w = sel_s / (tl.sum(sel_s, axis=0) + 1e-20) * scaling
    tl.store(idx_ptr + t * TOP_K + kk, sel_idx)
    tl.store(w_ptr + t * TOP_K + kk, w)


def route_triton(routing_logits, routing_bias, routed_scaling_factor, topk_idx, topk_w):
    """Fills topk_idx [T, 8] int32 (global expert ids) and topk_w [T, 8] fp32."""
    num_tokens, num_experts = routing_logits.shape
    if num_tokens == 0:
        return
    _routing_kernel[(num_tokens,)](
        routing_logits, routing_bias, topk_idx, topk_w, float(routed_scaling_factor),
        N_EXP=num_experts, N_GROUP=N_GROUP, TOPK_GROUP=TOPK_GROUP, TOP_K=TOP_K)


@triton.jit
def _scatter_kernel(topk_idx_ptr, hs_ptr, hs_scale_ptr, a_ptr, sfa_ptr, counts_ptr, pair_pos_ptr,
                    num_tokens, max_m, local_offset,
                    H: tl.constexpr, NB: tl.constexpr, E: tl.constexpr, TOP_K: tl.constexpr,
                    BLOCK_H: tl.constexpr, BLOCK_NB: tl.constexpr):
    """One program per token: claim a row in each local expert (atomic per-expert counter),
    copy the FP8 row (as bytes) and its H/128 scales there, record the pair's position."""
    t = tl.program_id(0).to(tl.int64)
    kk = tl.arange(0, TOP_K)
    expert = tl.load(topk_idx_ptr + t * TOP_K + kk) - local_offset
    local = (expert >= 0) & (expert < E)
    e_safe = tl.where(local, expert, 0)
    slot = tl.atomic_add(counts_ptr + e_safe, tl.full([TOP_K], 1, tl.int32), mask=local)
    slot = tl.where(local, slot, 0)
    pos = tl.where(local, e_safe * max_m + slot, -1)
    tl.store(pair_pos_ptr + t * TOP_K + kk, pos)
    row = (e_safe * max_m + slot).to(tl.int64)
    for h0 in tl.static_range(0, H, BLOCK_H):
        ho = h0 + tl.arange(0, BLOCK_H)
        hm = ho < H
        x = tl.load(hs_ptr + t * H + ho, mask=hm)
        tl.store(a_ptr + row[:, None] * H + ho[None, :], tl.broadcast_to(x[None, :], (TOP_K, BLOCK_H)),
                 mask=local[:, None] & hm[None, :])
    nb = tl.arange(0, BLOCK_NB)
    nbm = nb < NB
    sc = tl.load(hs_scale_ptr + nb.to(tl.int64) * num_tokens + t, mask=nbm, other=0.0)
    sfa_off = (e_safe.to(tl.int64) * NB * max_m + slot)[:, None] + nb[None, :].to(tl.int64) * max_m
    tl.store(sfa_ptr + sfa_off, tl.broadcast_to(sc[None, :], (TOP_K, BLOCK_NB)),
             mask=local[:, None] & nbm[None, :])


def scatter(topk_idx, hidden_states, hidden_states_scale, local_expert_offset, a1, sfa1, counts,
            pair_pos):
    """counts must be zero on entry; a1 [E, M, H] fp8, sfa1 [E, H/128, M] fp32."""
    num_tokens, hidden = hidden_states.shape
    num_local, max_m, _ = a1.shape
    if num_tokens == 0:
        return
    nb = hidden // 128
    _scatter_kernel[(num_tokens,)](
        topk_idx, hidden_states.view(torch.uint8), hidden_states_scale, a1.view(torch.uint8), sfa1,
        counts, pair_pos, num_tokens, max_m, int(local_expert_offset),
        H=hidden, NB=nb, E=num_local, TOP_K=TOP_K, BLOCK_H=min(1024, triton.next_power_of_2(hidden)),
        BLOCK_NB=triton.next_power_of_2(nb))


@triton.jit
def _swiglu_quant_kernel(d1_ptr, counts_ptr, a2_ptr, sfa2_ptr, max_m,
                         I: tl.constexpr, NBI: tl.constexpr, BLOCK_M: tl.constexpr):
    """Program (e, rb): rows [rb*BLOCK_M, +BLOCK_M) of expert e (exits at once past counts[e]);
    for each 128-wide column block: c = silu(gate) * up in fp32, per-row amax/448 scale, FP8."""
    e = tl.program_id(0)
    rb = tl.program_id(1)
    cnt = tl.load(counts_ptr + e)
    if rb * BLOCK_M >= cnt:
        return
    rows = rb * BLOCK_M + tl.arange(0, BLOCK_M)
    rm = rows < cnt
    base = e.to(tl.int64) * max_m + rows
    for kb in tl.static_range(NBI):
        cols = kb * 128 + tl.arange(0, 128)
        up = tl.load(d1_ptr + base[:, None] * (2 * I) + cols[None, :], mask=rm[:, None], other=0.0)
        gate = tl.load(d1_ptr + base[:, None] * (2 * I) + I + cols[None, :], mask=rm[:, None], other=0.0)
        up = up.to(tl.float32)
        gate = gate.to(tl.float32)
        c = gate * tl.sigmoid(gate) * up
        amax = tl.max(tl.abs(c), axis=1)
        scale = tl.maximum(amax, 1e-10) / 448.0
        q = (c / scale[:, None]).to(a2_ptr.dtype.element_ty)
        tl.store(a2_ptr + base[:, None] * I + cols[None, :], q, mask=rm[:, None])
        tl.store(sfa2_ptr + (e.to(tl.int64) * NBI + kb) * max_m + rows, scale, mask=rm)


def swiglu_quant(d1, counts, a2, sfa2, block_m: int = 32):
    """d1 [E, M, 2I] bf16 -> a2 [E, M, I] fp8 + sfa2 [E, I/128, M] fp32 (rows < counts[e]).
    Grid (E, M / block_m); programs past an expert's count return at once."""
    num_local, max_m, two_i = d1.shape
    inter = two_i // 2
    _swiglu_quant_kernel[(num_local, triton.cdiv(max_m, block_m))](
        d1, counts, a2, sfa2, max_m, I=inter, NBI=inter // 128, BLOCK_M=block_m)


@triton.jit
def _combine_kernel(d2_ptr, pair_pos_ptr, w_ptr, out_ptr,
                    H: tl.constexpr, TOP_K: tl.constexpr, BLOCK_H: tl.constexpr):
    """out[t, block] = sum_k w[t, k] * d2[pair_pos[t, k], block] (fp32), 0 with no local pair."""
    t = tl.program_id(0).to(tl.int64)
    hb = tl.program_id(1)
    ho = hb * BLOCK_H + tl.arange(0, BLOCK_H)
    hm = ho < H
    acc = tl.zeros([BLOCK_H], dtype=tl.float32)
    for k in tl.static_range(TOP_K):
        pos = tl.load(pair_pos_ptr + t * TOP_K + k)
        w = tl.load(w_ptr + t * TOP_K + k).to(tl.float32)
        valid = pos >= 0
        x = tl.load(d2_ptr + tl.maximum(pos, 0).to(tl.int64) * H + ho, mask=hm & valid, other=0.0)
        acc += x.to(tl.float32) * tl.where(valid, w, 0.0)
    tl.store(out_ptr + t * H + ho, acc.to(out_ptr.dtype.element_ty), mask=hm)


def combine(d2, pair_pos, topk_w, output):
    """output [T, H] bf16 from d2 [E, M, H] bf16."""
    num_tokens, hidden = output.shape
    if num_tokens == 0:
        return
    block_h = min(1024, triton.next_power_of_2(hidden))
    _combine_kernel[(num_tokens, triton.cdiv(hidden, block_h))](
        d2, pair_pos, topk_w, output, H=hidden, TOP_K=TOP_K, BLOCK_H=block_h)
