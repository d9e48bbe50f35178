"""DSA sparse attention on Hopper with FlashInfer's dense MLA wrapper
(``flashinfer.mla.BatchMLAPagedAttentionWrapper``, backend "fa3", the SM90 kernel), used as
SGLang's Hopper DSA path uses FA3: the cache seen as page_size = 1 and each query token's valid
selected ids as its page list.  Two entry points (two manifests):

  ``run``             (``attention_flashinfer_mla_fa3``, manifest.json): the plan (host work:
                      indptr arrays copied to the CPU, work partition) runs IN the call, as a
                      serving engine does every step; ``prepare`` only allocates the wrapper;
  ``run_preplanned``  (``attention_flashinfer_mla_fa3_preplanned``, manifest.preplanned.json):
                      ``prepare_preplanned`` (untimed) also plans; the call is only
                      ``wrapper.run``.

  prepare (untimed)  the wrapper and its 128 MiB float workspace (allocated once by an engine)
  plan               kv_len[t] = #valid ids, kv_indptr = [0, cumsum], kv_indices = the valid ids
                     in row order (boolean mask: one device->host sync), qo_indptr = 0..T;
                     wrapper.plan(qo_indptr, kv_indptr, kv_indices, kv_len, 16, 512, 64,
                     page_size=1, causal=False, sm_scale, bf16, bf16);
  run                wrapper.run(q_nope, q_pe, ckv [P*64, 1, 512], kpe [P*64, 1, 64],
                     out=output, lse=lse, return_lse=True) -> base-2 LSE (FlashInfer default).

A token with no valid index gets kv_len 0; what fa3 writes for it is checked by the self-check.
"""

import functools

import torch

WORKSPACE_BYTES = 128 * 1024 * 1024


@functools.lru_cache(maxsize=None)
def _wrapper_cls():
    from flashinfer.mla import BatchMLAPagedAttentionWrapper
    return BatchMLAPagedAttentionWrapper


def make_wrapper(device):
    workspace = torch.empty(WORKSPACE_BYTES, dtype=torch.uint8, device=device)
    return _wrapper_cls()(workspace, backend="fa3")


def plan(wrapper, sparse_indices, num_heads, head_dim_ckv, head_dim_kpe, sm_scale, dtype):
    tokens = sparse_indices.shape[0]
    dev = sparse_indices.device
    valid = sparse_indices >= 0
    kv_len = valid.sum(dim=1, dtype=torch.int32)
    kv_indptr = torch.zeros(tokens + 1, dtype=torch.int32, device=dev)
    torch.cumsum(kv_len, dim=0, out=kv_indptr[1:])
    kv_indices = sparse_indices[valid]
    qo_indptr = torch.arange(tokens + 1, dtype=torch.int32, device=dev)
    wrapper.plan(qo_indptr, kv_indptr, kv_indices, kv_len, num_heads, head_dim_ckv, head_dim_kpe,
                 1, False, float(sm_scale), dtype, dtype)


def paged_views(ckv_cache, kpe_cache):
    return (ckv_cache.view(-1, 1, ckv_cache.shape[-1]), kpe_cache.view(-1, 1, kpe_cache.shape[-1]))


@torch.no_grad()
def prepare(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    return {"wrapper": make_wrapper(q_nope.device)}


@torch.no_grad()
def run(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, output, lse, *, state):
    plan(state["wrapper"], sparse_indices, q_nope.shape[1], ckv_cache.shape[-1], kpe_cache.shape[-1],
         sm_scale, q_nope.dtype)
    return run_preplanned(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, output, lse, state=state)


@torch.no_grad()
def prepare_preplanned(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale):
    state = prepare(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale)
    plan(state["wrapper"], sparse_indices, q_nope.shape[1], ckv_cache.shape[-1], kpe_cache.shape[-1],
         sm_scale, q_nope.dtype)
    return state


@torch.no_grad()
def run_preplanned(q_nope, q_pe, ckv_cache, kpe_cache, sparse_indices, sm_scale, output, lse, *, state):
    ckv, kpe = paged_views(ckv_cache, kpe_cache)
    state["wrapper"].run(q_nope, q_pe, ckv, kpe, out=output, lse=lse, return_lse=True)
    return output, lse
