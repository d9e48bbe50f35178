"""Gated Delta Net decode, k-last state ``[B, HV, V, K]`` (FlashInfer-Bench ``gdn_decode_*_k_last``).

One program per (batch row, value head, block of BLOCK_V value rows).  With S = state[b, h]
(rows j over V, columns i over K), q/k the query/key head that value head h reads (GVA), and
g = exp(-exp(A_log[h]) * softplus(a + dt_bias[h])), beta = sigmoid(b):

    old_v[j]   = g * sum_i k[i] S[j, i]
    new_S[j,i] = g * S[j, i] + k[i] * beta * (v[j] - old_v[j])
    out[j]     = scale * sum_i q[i] new_S[j, i]

Everything in fp32; ``out`` is stored as bf16.  A test solution (tests/test_fib_definitions.py),
not tuned: the whole K row of a block sits in registers.
"""

import math

import triton
import triton.language as tl


@triton.jit
def _gdn_decode(q_ptr, k_ptr, v_ptr, s_ptr, alog_ptr, a_ptr, dtb_ptr, b_ptr, out_ptr, ns_ptr, scale,
                HQ: tl.constexpr, HV: tl.constexpr, K: tl.constexpr, V: tl.constexpr, BLOCK_V: tl.constexpr):
    bi = tl.program_id(0)
    h = tl.program_id(1)
    vb = tl.program_id(2)
    hq = h // (HV // HQ)
    cols = tl.arange(0, K)
    rows = vb * BLOCK_V + tl.arange(0, BLOCK_V)
    q = tl.load(q_ptr + (bi * HQ + hq) * K + cols).to(tl.float32)
    k = tl.load(k_ptr + (bi * HQ + hq) * K + cols).to(tl.float32)
    v = tl.load(v_ptr + (bi * HV + h) * V + rows).to(tl.float32)
    x = tl.load(a_ptr + bi * HV + h).to(tl.float32) + tl.load(dtb_ptr + h)
    softplus = tl.where(x > 20.0, x, tl.log(1.0 + tl.exp(x)))
    g = tl.exp(-tl.exp(tl.load(alog_ptr + h)) * softplus)
    beta = 1.0 / (1.0 + tl.exp(-tl.load(b_ptr + bi * HV + h).to(tl.float32)))
    base = (bi * HV + h) * V * K
    offs = base + rows[:, None] * K + cols[None, :]
    s = tl.load(s_ptr + offs)
    old_v = g * tl.sum(s * k[None, :], axis=1)
    delta = beta * (v - old_v)
    new_s = g * s + delta[:, None] * k[None, :]
    out = scale * tl.sum(new_s * q[None, :], axis=1)
    tl.store(ns_ptr + offs, new_s)
    tl.store(out_ptr + (bi * HV + h) * V + rows, out.to(tl.bfloat16))


def run(q, k, v, state, A_log, a, dt_bias, b, scale, output, new_state):
    """DPS: q, k [B, 1, HQ, K] bf16; v [B, 1, HV, V] bf16; state [B, HV, V, K] f32; A_log, dt_bias
    [HV] f32; a, b [B, 1, HV] bf16; scale float (0 or None: 1/sqrt(K)); writes output
    [B, 1, HV, V] bf16 and new_state [B, HV, V, K] f32."""
    batch, _, hq, dim_k = q.shape
    hv, dim_v = v.shape[2], v.shape[3]
    if scale is None or scale == 0.0:
        scale = 1.0 / math.sqrt(dim_k)
    block_v = min(dim_v, 128)   # one program per (batch row, head) at the test sizes: cheap under the interpreter
    _gdn_decode[(batch, hv, dim_v // block_v)](q, k, v, state, A_log, a, dt_bias, b, output, new_state, float(scale),
                                                HQ=hq, HV=hv, K=dim_k, V=dim_v, BLOCK_V=block_v)
