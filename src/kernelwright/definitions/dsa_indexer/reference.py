"""Reference for dsa_topk_indexer_fp8_h64_d128_topk2048_ps64 (plain PyTorch).

Semantics (FlashInfer-Bench definition of the same name; DeepSeek-V3.2 lightning indexer):
  The K cache [num_pages, page_size, 1, 132] int8 is DeepGEMM's paged FP8 layout, read as bytes:
  per page, first page_size*128 FP8 e4m3 values (token-major), then page_size fp32 scales.
  For batch row b and each token t < seq_lens[b] (token t lives in page block_table[b, t // 64]
  at offset t % 64):  score[t] = sum_h relu(q[b, h] . k_t * scale_t) * weights[b, h].
  The output holds the global token ids (page * page_size + offset) of the top min(topk, seq_len)
  scores, padded with -1.  Order and tie-breaking are free: the gate compares sorted scores.
"""

import torch


def dequantize_k_cache(k_index_cache_fp8):
    """[P, page, 1, D+4] int8 packed cache -> [P, page, D] fp32 keys (scale applied)."""
    raw = k_index_cache_fp8.view(torch.uint8)
    num_pages, page_size, _, row_bytes = raw.shape
    head_dim = row_bytes - 4
    flat = raw.reshape(num_pages, page_size * row_bytes)
    values = flat[:, : page_size * head_dim].contiguous().view(torch.float8_e4m3fn)
    values = values.view(num_pages, page_size, head_dim).to(torch.float32)
    scales = flat[:, page_size * head_dim :].contiguous().view(torch.float32).view(num_pages, page_size, 1)
    return values * scales


def row_token_ids(block_table_row, seq_len, page_size):
    """Global token ids of the first seq_len tokens of one batch row, in sequence order."""
    num_row_pages = (seq_len + page_size - 1) // page_size
    pages = block_table_row[:num_row_pages].to(torch.long)
    offsets = torch.arange(page_size, device=pages.device)
    return (pages[:, None] * page_size + offsets[None, :]).reshape(-1)[:seq_len]


def row_scores(q_row, keys_flat, weights_row, token_ids):
    """Weighted-ReLU scores [len(token_ids)] of one query row ([H, D] fp32) over the given tokens."""
    k = keys_flat.index_select(0, token_ids)
    logits = q_row @ k.t()
    return (torch.relu(logits) * weights_row[:, None]).sum(dim=0)


@torch.no_grad()
def run(q_index_fp8, k_index_cache_fp8, weights, seq_lens, block_table):
    batch_size = q_index_fp8.shape[0]
    page_size = k_index_cache_fp8.shape[1]
    topk = 2048
    device = q_index_fp8.device
    q = q_index_fp8.to(torch.float32)
    keys_flat = dequantize_k_cache(k_index_cache_fp8).reshape(-1, q.shape[-1])
    topk_indices = torch.full((batch_size, topk), -1, dtype=torch.int32, device=device)
    for b in range(batch_size):
        seq_len = int(seq_lens[b].item())
        if seq_len <= 0:
            continue
        token_ids = row_token_ids(block_table[b], seq_len, page_size)
        scores = row_scores(q[b], keys_flat, weights[b].to(torch.float32), token_ids)
        count = min(topk, seq_len)
        best = torch.topk(scores, count).indices
        topk_indices[b, :count] = token_ids[best].to(torch.int32)
    return topk_indices
