"""Input synthesis: random tensors by the FlashInfer-Bench convention, and realistic stand-ins for
the tensors the contest captured from real serving (routing logits, page tables, sparse indices).

Everything here is a pure function of its arguments and a ``torch.Generator``: the same seed
gives the same inputs on the same device.
"""

from kernelwright.inputs.paging import (
    pack_index_k_cache,
    random_index_k_cache,
    synth_block_table,
    synth_request_sparse_indices,
    synth_seq_lens,
    synth_sparse_indices,
)
from kernelwright.inputs.random import make_generator, random_offsets, random_tensor, seed_for
from kernelwright.inputs.routing import synth_routing_bias, synth_routing_logits

__all__ = [
    "make_generator",
    "pack_index_k_cache",
    "random_index_k_cache",
    "random_offsets",
    "random_tensor",
    "seed_for",
    "synth_block_table",
    "synth_request_sparse_indices",
    "synth_routing_bias",
    "synth_routing_logits",
    "synth_seq_lens",
    "synth_sparse_indices",
]
