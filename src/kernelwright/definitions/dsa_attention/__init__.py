"""dsa_sparse_attention_h16_ckv512_kpe64_topk2048_ps64: the built-in definition."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any, Dict, List, Mapping

import torch

from kernelwright.definitions.base import (
    RooflineWork, StrictRule, Tolerance, contest_axes, context_of, load_definition, package_builtin,
)
from kernelwright.definitions.dsa_attention import reference
from kernelwright.inputs import random_tensor, synth_request_sparse_indices, synth_sparse_indices
from kernelwright.trace import Definition, RandomInput, ScalarInput, Workload, torch_dtype

DEFINITION = load_definition(Path(__file__).parent, reference)
NAME = DEFINITION.name
CONTEST_SM_SCALE = 0.1352337788608801  # (1/sqrt(192)) * (0.1*ln 40 + 1)^2, the contest's value


def make_inputs(definition: Definition, workload: Workload, gen: torch.Generator,
                device: torch.device) -> Dict[str, Any]:
    """Random bf16 queries and caches; synthetic sparse indices (stand-ins for the contest's
    captures): each query token its own request (``synth_sparse_indices``), or, for a workload
    whose uuid names a request context (``-ctx<tokens>``, the serving envelope), all T tokens
    from that one request (``synth_request_sparse_indices``: rows overlap)."""
    axes = definition.axis_values(workload.axes)
    context = context_of(workload.uuid)
    out: Dict[str, Any] = {}
    for name, spec in definition.inputs.items():
        src = workload.inputs.get(name, RandomInput())
        if isinstance(src, ScalarInput):
            out[name] = src.value
        elif name == "sparse_indices" and context is not None:
            out[name] = synth_request_sparse_indices(axes["num_tokens"], axes["topk"], context, axes["num_pages"],
                                                     axes["page_size"], gen, device)
        elif name == "sparse_indices":
            out[name] = synth_sparse_indices(axes["num_tokens"], axes["topk"], axes["num_pages"],
                                             axes["page_size"], gen, device)
        else:
            out[name] = random_tensor(definition.shape_of(name, workload.axes),
                                      torch_dtype(spec.dtype), gen, device)
    return out


def roofline(inputs: Mapping[str, Any], axes: Mapping[str, int]) -> RooflineWork:
    """FLOPs = 2*h*(ckv+kpe+ckv) per (query, valid index); bytes = each distinct selected KV row
    once ((ckv+kpe)*2 B) + queries, indices, bf16 output and fp32 LSE."""
    idx = inputs["sparse_indices"]
    valid = idx[idx >= 0]
    heads, ckv = inputs["q_nope"].shape[1:]
    kpe = inputs["q_pe"].shape[-1]
    tokens = idx.shape[0]
    unique_rows = float(torch.unique(valid).numel())
    flops = 2.0 * heads * (ckv + kpe + ckv) * float(valid.numel())
    small = tokens * (heads * (ckv + kpe) * 2 + idx.shape[1] * 4 + heads * ckv * 2 + heads * 4)
    return RooflineWork(flops=flops, bytes=unique_rows * (ckv + kpe) * 2 + small, unit="bf16")


def regime(axes: Mapping[str, int]) -> str:
    t = axes["num_tokens"]
    return "T<=2" if t <= 2 else "T>=6"


def _workload(uuid: str, tokens: int, num_pages: int, sm_scale: float = CONTEST_SM_SCALE) -> Workload:
    inputs: Dict[str, Any] = {n: RandomInput() for n in DEFINITION.inputs}
    inputs["sm_scale"] = ScalarInput(value=sm_scale)
    return Workload(uuid=uuid, axes={"num_tokens": tokens, "num_pages": num_pages}, inputs=inputs)


def public_workloads() -> List[Workload]:
    """The 23 contest workloads (uuids and axis values of the mlsys26 contest set)."""
    return [_workload(u, v["num_tokens"], v["num_pages"]) for u, v in contest_axes(NAME).items()]


def hidden_workloads(salt: str) -> List[Workload]:
    """Held-out workloads: contest-like ones (each token its own request) and two from the
    serving envelope (one request's chunk, its context in the uuid), drawn from ``salt``."""
    rng = random.Random(f"attention-hidden/{salt}")
    sizes = [rng.randint(3, 5), rng.randint(9, 16), rng.randint(17, 40), 1]
    out = [_workload(f"hidden-att-{i}-{salt[:8]}", t, rng.randint(2000, 9000), 1 / 192 ** 0.5)
           for i, t in enumerate(sizes)]
    for i, (t, context) in enumerate([(rng.randint(2, 12), rng.randint(3000, 120000)),
                                      (rng.randint(20, 128), rng.randint(1500, 60000))]):
        out.append(_workload(f"hidden-att-{len(sizes) + i}-{salt[:8]}-ctx{context}", t,
                             2 * ((context + 63) // 64), 1 / 192 ** 0.5))
    return out


SWEEP_TOKENS = [1, 2, 4, 8, 16, 32, 64, 128]
SWEEP_CONTEXTS = [4096, 32768, 131072]
SWEEP_SHORT = [(1, 1024), (8, 1024), (64, 1024)]    # fewer than topk valid indices per row (-1 padded)


def sweep_workloads() -> List[Workload]:
    """The serving envelope: T = 1 ... 128 query tokens of one request (decode, speculative
    decode, chunked prefill) at contexts of 4K, 32K and 128K tokens, plus a 1K context (rows with
    fewer than 2048 valid indices); the cache holds twice the request's pages.  27 workloads,
    uuids ``sweep-att-t<T>-ctx<tokens>``."""
    shapes = [(t, c) for c in SWEEP_CONTEXTS for t in SWEEP_TOKENS] + SWEEP_SHORT
    return [_workload(f"sweep-att-t{t}-ctx{c}", t, 2 * ((c + 63) // 64)) for t, c in shapes]


def sweep_regime(axes: Mapping[str, int]) -> str:
    return f"T={axes['num_tokens']}"


def quick_workloads() -> List[Workload]:
    return [_workload("quick-att-t1", 1, 6), _workload("quick-att-t3", 3, 6)]


# kernelwright's strict rule (docs/gate.md, section 2a), on ``output`` (also per
# (token, head) row) and ``lse``: an honest bf16 kernel reaches ~1.3e-3 (worst row ~3e-3, LSE
# ~1e-7); an output scaled by 0.8 scores 0.2, a zeroed row 1.0, half of the indices ~1
STRICT = StrictRule(max_rel_l2=2e-2, max_row_rel_l2=3e-2, row_axes=2)

BUILTIN = package_builtin(
    sys.modules[__name__],
    short="attention",
    tolerance=Tolerance(atol=1e-2, rtol=1e-2, required_matched_ratio=1.0, strict=STRICT),
    checker="attention",
    quick_axes={"topk": 64},
    regimes_order=["T<=2", "T>=6"],
    sweep_regimes_order=[f"T={t}" for t in SWEEP_TOKENS],
    size_axis=("query tokens T", lambda axes: axes["num_tokens"]),
    sweep_series=lambda w: f"ctx {(context_of(w.uuid) or 0) // 1024}K",
)
