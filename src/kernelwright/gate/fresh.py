"""The inputs of timed iterations: fresh contents every iteration, and "twins".

A timed iteration's inputs are described by a *spec* that both processes expand the same way:

* an ``int`` seed: ``builtin.make_inputs`` with a generator seeded by it (fresh contents);
* a shared spec ``["shared", seed, shared_seed]``: the inputs of ``seed`` with the definition's
  ``shared_inputs`` (those whose values set the cost, e.g. MoE's routing) made by
  ``builtin.make_shared_inputs`` from ``shared_seed``, which every candidate of a run gets for the
  same (trial, iteration), while ``seed`` is the candidate's own: candidates are timed on the same
  costs, never on the same inputs;
* a twin ``[base, donor_seed, name, start, length]``: the inputs of ``base`` (the spec of an
  EARLIER iteration of the same trial, on the same buffer set, i.e. the same addresses) with the
  elements ``start:start+length`` of input ``name`` taken from the inputs of ``donor_seed``.

A twin looks like a repeat to a cache keyed on the pointer, on the shapes and on a handful of
input values (an "input fingerprint"), yet its output differs; the parent always checks the
twin's output against its own reference, so such a cache fails with STALE_OUTPUT.  The changed
block is a fixed fraction of the largest floating-point input, big enough to move more output
elements than the definition's matched ratio forgives.

Fixed inputs (a workload's safetensors tensors, ``definitions/fixed.py``) are the same in every
spec's expansion, as in flashinfer-bench: ``make_inputs`` returns the file's tensor whatever the
seed.  The twin therefore changes the largest *random* floating-point input; with none (every
float input fixed) there is no twin, and the gate notes that fresh inputs could not vary what an
output cache would key on (``WorkloadContext.fresh_note``).
"""

from __future__ import annotations

import random
from typing import Any, Dict, List, Optional, Sequence, Union

import torch

from kernelwright.inputs import make_generator

Spec = Union[int, Sequence[Any]]


SHARED = "shared"


def shared_spec(seed: int, shared_seed: int) -> List[Any]:
    """The spec of a candidate's ``seed`` with the shared inputs of ``shared_seed``."""
    return [SHARED, int(seed), int(shared_seed)]


def is_twin(spec: Spec) -> bool:
    return not isinstance(spec, int) and spec[0] != SHARED


def expand(builtin, workload, spec: Spec, device: torch.device) -> Dict[str, Any]:
    """The inputs a spec stands for (deterministic: same spec, same device -> same bytes).

    Raises:
        ValueError: a shared spec for a definition without shared inputs.
    """
    if isinstance(spec, int):
        return builtin.make_inputs(builtin.definition, workload, make_generator(spec, device), device)
    if spec[0] == SHARED:
        if not builtin.shared_inputs or builtin.make_shared_inputs is None:
            raise ValueError(f"a shared spec for {builtin.name}, which has no shared inputs")
        inputs = builtin.make_inputs(builtin.definition, workload, make_generator(int(spec[1]), device), device)
        shared = builtin.make_shared_inputs(builtin.definition, workload, make_generator(int(spec[2]), device), device)
        inputs.update({name: shared[name] for name in builtin.shared_inputs})
        return inputs
    seed, donor_seed, name, start, length = spec
    base = expand(builtin, workload, seed if not isinstance(seed, int) else int(seed), device)
    donor = builtin.make_inputs(builtin.definition, workload, make_generator(int(donor_seed), device), device)
    target = base[name]
    if not target.is_contiguous():
        target = target.contiguous()
        base[name] = target
    flat = target.view(-1)
    flat[int(start):int(start) + int(length)].copy_(donor[name].reshape(-1)[int(start):int(start) + int(length)])
    return base


def key(spec: Spec):
    """A hashable form of a spec."""
    return spec if isinstance(spec, int) else tuple(key(x) if isinstance(x, (list, tuple)) else x for x in spec)


def twin_target(input_meta, fixed: Sequence[str] = ()) -> Optional[tuple]:
    """(name, numel) of the largest floating-point tensor input that is not ``fixed`` (a
    workload's safetensors inputs are the same in every iteration: a twin must not change
    them), or None."""
    best = None
    for name, shape, dtype in input_meta:
        if shape is None or not dtype.startswith(("float", "bfloat")) or name in fixed:
            continue
        n = 1
        for s in shape:
            n *= int(s)
        if n > 0 and (best is None or n > best[1]):
            best = (name, n)
    return best


def twin_fraction(required_matched_ratio: float) -> float:
    """Fraction of the target's elements a twin changes: a fixed block large enough that an
    output computed for the source iteration misses the matched ratio."""
    return min(0.5, max(1.0 / 16, 2.0 * (1.0 - required_matched_ratio) + 0.05))


def plan_trial(seeds: List[Spec], warmup: int, nsets: int, input_meta, ratio: float, rng: random.Random,
               donor_seed: int, fixed: Sequence[str] = ()) -> tuple:
    """Turn one timed iteration of a trial (``seeds``: int seeds or shared specs) into a twin of the
    iteration ``nsets`` earlier (same buffer set), changing a block of its largest floating-point
    input that is not ``fixed``.  Returns (specs, twin index or None: no such input)."""
    specs: List[Spec] = list(seeds)
    target = twin_target(input_meta, fixed)
    lo = warmup + nsets
    if target is None or len(seeds) <= lo:
        return specs, None
    j = rng.randrange(lo, len(seeds))
    name, n = target
    length = max(1, int(n * twin_fraction(ratio)))
    start = rng.randrange(0, n - length + 1)
    base = seeds[j - nsets]
    specs[j] = [int(base) if isinstance(base, int) else list(base), int(donor_seed), name, start, length]
    return specs, j
