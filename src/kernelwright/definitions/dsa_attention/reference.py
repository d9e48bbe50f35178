"""Reference for dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64 (plain PyTorch).

Semantics (FlashInfer-Bench definition of the same name; DeepSeek-V3.2 sparse MLA, absorbed form):
  For each query token t, over the valid entries of sparse_indices[t] (global token ids
  page * 64 + offset; -1 is padding):
      logits = (q_nope[t] Kc^T + q_pe[t] Kp^T) * sm_scale          [heads, n_valid]
      output[t] = softmax(logits) Kc  (bf16)                         [heads, 512]
      lse[t] = logsumexp(logits) / ln 2   (base-2 log-sum-exp, fp32) [heads]
  A token whose indices are all -1 gets output 0 and lse = -inf.
"""

import math

import torch


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    num_tokens, num_heads, ckv_dim = q_nope.shape
    kpe_dim = q_pe.shape[-1]
    device = q_nope.device
    kc_all = ckv_cache.reshape(-1, ckv_dim).to(torch.float32)
    kp_all = kpe_cache.reshape(-1, kpe_dim).to(torch.float32)
    output = torch.zeros((num_tokens, num_heads, ckv_dim), dtype=torch.bfloat16, device=device)
    lse = torch.full((num_tokens, num_heads), -float("inf"), dtype=torch.float32, device=device)
    for t in range(num_tokens):
        idx = sparse_indices[t]
        idx = idx[idx != -1].to(torch.long)
        if idx.numel() == 0:
            continue
        kc = kc_all.index_select(0, idx)
        kp = kp_all.index_select(0, idx)
        logits = (q_nope[t].to(torch.float32) @ kc.t() + q_pe[t].to(torch.float32) @ kp.t()) * sm_scale
        lse[t] = torch.logsumexp(logits, dim=-1) / math.log(2.0)
        output[t] = (torch.softmax(logits, dim=-1) @ kc).to(torch.bfloat16)
    return output, lse
