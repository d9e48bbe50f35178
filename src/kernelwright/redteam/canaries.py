"""Canaries: deliberately wrong solutions that must fail EVERY definition they apply to.  If one
passes, the definition's verdict (contest rule plus strict rule, ``gate/checkers.py``) cannot tell
that wrong answer from a right one, and the gate says so ("tolerance broken").

Two families:

* **fills** (every definition, including user definitions): ``zeros`` and ``constant`` write one
  value into every output and launch nothing.
* **near misses** (the built-in definitions; what a cheaper, wrong kernel would return): the
  reference's outputs, then damaged by ``damaged_outputs``:

  ========================  =============================================================  =====================
  kind                      damage                                                         definitions
  ========================  =============================================================  =====================
  ``scale_0.8``             the first output times 0.8 (attention: ``output``; ``lse``     demo, moe, attention
                            left exact)
  ``scale_1.25``            the first output times 1.25                                    demo, moe, attention
  ``zero_rows``             5 % of the rows (at least one) whose reference is nonzero      demo, moe, attention,
                            zeroed (attention: (token, head) rows of ``output``; the        indexer
                            indexer: batch rows set to -1)
  ``drop_expert``           every token's lowest-weight local expert left out              moe
  ``half_indices``          each token attends to the first half of its valid indices      attention
  ``drop_head``             top-k of scores computed without index head 0                  indexer
  ========================  =============================================================  =====================

  The indexer's output is a set of indices, which no scale changes (the top-k of 0.8 x scores is
  the same set), so it has no scale canaries.  ``drop_head`` only differs from the reference in
  rows with more than ``topk`` tokens, so it runs on the workloads that have such rows
  (``applies``).

Every canary is a destination-passing Python solution generated per definition; a near miss
imports this module in the worker and calls ``damaged_outputs``.  They are evaluated with
``requires_kernel=False``: provenance must not be what rejects them, only the numerical checks.
The tests apply the same damage in-process (``tests/redteam/test_canaries_damage.py``).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Mapping, Optional, Sequence

import torch

from kernelwright.gate import guards
from kernelwright.redteam.verdicts import ERROR, PASS, REJECT
from kernelwright.trace import Solution, Workload
from kernelwright.trace.solution import BuildSpec, SourceFile

_FILL_TEMPLATE = '''"""Canary ({kind}) for {definition}: writes {what} into every output, launches nothing."""

N_OUT = {n_out}


def run(*args):
    for out in args[-N_OUT:]:
        if out.is_floating_point():
            out.fill_({float_value})
        else:
            out.fill_({int_value})
'''

_DAMAGE_TEMPLATE = '''"""Canary ({kind}) for {definition}: {what}."""

from kernelwright.redteam.canaries import damaged_outputs

N_OUT = {n_out}


def run(*args):
    for out, value in zip(args[-N_OUT:], damaged_outputs({short!r}, {kind!r}, args[:-N_OUT])):
        out.copy_(value)
'''

FILLS = {
    "zeros": {"what": "zeros", "float_value": "0.0", "int_value": "0"},
    "constant": {"what": "a constant (1.0; -1 for integer outputs)", "float_value": "1.0", "int_value": "-1"},
}

ZERO_ROWS_FRACTION = 0.05


@dataclass(frozen=True)
class NearMiss:
    """One kind of damage to the reference's outputs.

    ``damage(builtin, named_inputs, reference_outputs)`` returns the damaged outputs (a list in
    the definition's output order); ``applies(builtin, workload)`` says whether the damage can
    change the answer on that workload (default: always)."""

    what: str
    definitions: Sequence[str]
    damage: Callable[[Any, Dict[str, Any], List[torch.Tensor]], List[torch.Tensor]]
    applies: Callable[[Any, Workload], bool] = lambda builtin, workload: True


def _scaled(factor: float):
    def damage(builtin, inputs, outs):
        return [(outs[0].float() * factor).to(outs[0].dtype)] + outs[1:]
    return damage


def _rows_to_drop(live: torch.Tensor, total_rows: int) -> torch.Tensor:
    """Indices (into ``live``'s row numbering) of ZERO_ROWS_FRACTION of ``total_rows`` rows, at
    least one, spread evenly over the rows whose reference is nonzero (``live``: their numbers)."""
    count = min(live.numel(), max(1, round(ZERO_ROWS_FRACTION * total_rows)))
    if count == 0:
        return live[:0]
    picks = torch.linspace(0, live.numel() - 1, count, device=live.device).round().long()
    return live[picks]


def _zero_rows(builtin, inputs, outs):
    out = outs[0].clone()
    if builtin.checker == "topk_indices":
        live = torch.nonzero((out >= 0).any(dim=1)).squeeze(1)
        out[_rows_to_drop(live, out.shape[0])] = -1
        return [out] + outs[1:]
    row_axes = builtin.tolerance.strict.row_axes if builtin.tolerance.strict else 1
    rows = out.reshape(math.prod(out.shape[:row_axes]), -1)
    live = torch.nonzero(rows.float().abs().amax(dim=1) > 0).squeeze(1)
    rows[_rows_to_drop(live, rows.shape[0])] = 0
    return [out] + outs[1:]


def _drop_expert(builtin, inputs, outs):
    from kernelwright.definitions.moe_fp8 import reference

    topk_idx, weights = reference.deepseek_v3_routing(inputs["routing_logits"], inputs["routing_bias"],
                                                      float(inputs["routed_scaling_factor"]))
    first = int(inputs["local_expert_offset"])
    local = (topk_idx >= first) & (topk_idx < first + inputs["gemm1_weights"].shape[0])
    chosen = weights.gather(1, topk_idx).masked_fill(~local, math.inf)
    lowest = topk_idx.gather(1, chosen.argmin(dim=1, keepdim=True)).squeeze(1)
    tokens = torch.nonzero(local.any(dim=1)).squeeze(1)
    weights = weights.clone()
    weights[tokens, lowest[tokens]] = 0.0
    act = reference.dequantize_activations(inputs["hidden_states"], inputs["hidden_states_scale"])
    out = reference.local_experts_output(act, topk_idx, weights, inputs["gemm1_weights"],
                                         inputs["gemm1_weights_scale"], inputs["gemm2_weights"],
                                         inputs["gemm2_weights_scale"], first)
    return [out.to(outs[0].dtype)]


def _half_indices(builtin, inputs, outs):
    idx = inputs["sparse_indices"].clone()
    valid = idx >= 0
    rank = valid.long().cumsum(dim=1)                       # 1-based rank of each valid entry
    keep = valid.sum(dim=1, keepdim=True) // 2
    idx[valid & (rank > keep)] = -1
    return _reference_outputs(builtin, {**inputs, "sparse_indices": idx})


def _drop_head(builtin, inputs, outs):
    weights = inputs["weights"].clone()
    weights[:, 0] = 0.0
    return _reference_outputs(builtin, {**inputs, "weights": weights})


def _more_tokens_than_topk(builtin, workload: Workload) -> bool:
    axes = builtin.definition.axis_values(workload.axes)
    return axes["max_num_pages"] * axes["page_size"] > axes["topk"]


NEAR_MISSES: Dict[str, NearMiss] = {
    "scale_0.8": NearMiss("the reference's first output times 0.8", ("demo", "moe", "attention"), _scaled(0.8)),
    "scale_1.25": NearMiss("the reference's first output times 1.25", ("demo", "moe", "attention"), _scaled(1.25)),
    "zero_rows": NearMiss("the reference with 5 % of its nonzero rows zeroed (indexer: set to -1)",
                          ("demo", "moe", "attention", "indexer"), _zero_rows),
    "drop_expert": NearMiss("the reference without each token's lowest-weight local expert", ("moe",), _drop_expert),
    "half_indices": NearMiss("the reference over the first half of each token's valid indices", ("attention",),
                             _half_indices),
    "drop_head": NearMiss("the top-k of scores computed without index head 0", ("indexer",), _drop_head,
                          _more_tokens_than_topk),
}


def kinds_for(short: str) -> List[str]:
    """Every canary kind that runs on the definition with this short name: the fills, then the
    near misses that apply to it."""
    return list(FILLS) + [k for k, nm in NEAR_MISSES.items() if short in nm.definitions]


def _reference_outputs(builtin, inputs: Mapping[str, Any]) -> List[torch.Tensor]:
    from kernelwright.gate.evaluate import normalize_outputs

    named = normalize_outputs(builtin.reference(**inputs), builtin.definition.output_names)
    return [named[n] for n in builtin.definition.output_names]


def damaged_outputs(short: str, kind: str, args: Sequence[Any]) -> List[torch.Tensor]:
    """The near miss ``kind`` of the built-in definition ``short`` on positional inputs ``args``
    (the definition's input order): the reference's outputs, damaged.  Raises KeyError for an
    unknown kind or one that does not apply to ``short``."""
    from kernelwright import definitions

    near = NEAR_MISSES[kind]
    if short not in near.definitions:
        raise KeyError(f"canary {kind!r} does not apply to {short!r}")
    builtin = definitions.get(short)
    inputs = dict(zip(builtin.definition.input_names, args))
    with torch.no_grad():
        return near.damage(builtin, inputs, _reference_outputs(builtin, inputs))


def canary_solution(definition_name: str, n_outputs: int, kind: str, short: Optional[str] = None) -> Solution:
    """The canary ``kind`` as a Solution for ``definition_name``.  A near miss needs the built-in
    definition's ``short`` name.  Raises KeyError for an unknown kind."""
    if kind in FILLS:
        what = FILLS[kind]["what"]
        text = _FILL_TEMPLATE.format(kind=kind, definition=definition_name, n_out=n_outputs, **FILLS[kind])
    else:
        what = NEAR_MISSES[kind].what
        text = _DAMAGE_TEMPLATE.format(kind=kind, definition=definition_name, n_out=n_outputs, what=what,
                                       short=short)
    return Solution(name=f"canary_{kind.replace('.', '')}_{definition_name}", definition=definition_name,
                    author="kernelwright-canary",
                    spec=BuildSpec(language="python", target_hardware=["any"], entry_point="kernel.py::run",
                                   destination_passing_style=True),
                    sources=[SourceFile(path="kernel.py", content=text)],
                    description=f"canary: {what}")


@dataclass
class CanaryResult:
    definition: str
    kind: str
    verdict: str                      # REJECT | PASS (= tolerance broken) | ERROR
    reasons: List[str] = field(default_factory=list)
    workloads: int = 0
    detail: str = ""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return self.verdict == REJECT

    def as_dict(self) -> Dict:
        return {"definition": self.definition, "kind": self.kind, "verdict": self.verdict, "reasons": self.reasons,
                "workloads": self.workloads, "ok": self.ok, "detail": self.detail, "seconds": round(self.seconds, 2)}


def run_canary(builtin_name: str, kind: str, device: str, out_root: Path, cfg=None) -> CanaryResult:
    """Evaluate one canary on every quick workload of a definition it applies to; it must fail
    all of them (the default verdict: contest rule and strict rule)."""
    from kernelwright import definitions
    from kernelwright.gate.bench import evaluations
    from kernelwright.gate.evaluate import SolutionRun
    from kernelwright.gate.session import WorkerSession
    from kernelwright.redteam.runner import gate_config

    started = time.perf_counter()
    full = definitions.get(builtin_name)
    quick = full.quick_variant()
    if cfg is None:
        # every timed iteration checked, three trials: a canary that survives ~27 output checks on
        # fresh inputs means the tolerance really cannot tell (not a lucky draw of trivial inputs)
        from dataclasses import replace

        cfg = replace(gate_config(device), warmup=1, iterations=8, trials=3, samples_per_trial=8)
    applies = NEAR_MISSES[kind].applies if kind in NEAR_MISSES else (lambda builtin, workload: True)
    workloads = [w for w in quick.public_workloads() if applies(quick, w)]
    if not workloads:
        return CanaryResult(full.short, kind, ERROR, detail="no quick workload on which this canary is wrong",
                            seconds=time.perf_counter() - started)
    sol = canary_solution(full.name, len(full.definition.outputs), kind, short=full.short)
    session = WorkerSession(sol, cfg.device, log_dir=Path(out_root) / f"canary-{kind}-{full.short}" / "logs")
    run = SolutionRun(session, requires_kernel=False, label=sol.name)
    passed, reasons, detail, n = [], [], "", 0
    weak: List[str] = []   # workloads where the canary passed the correctness trials
    try:
        for w, _, trace in evaluations(quick, workloads, cfg, [run]):
            n += 1
            if trace.passed:
                passed.append(w.uuid)
            else:
                gate = trace.evaluation.gate
                codes = list(gate.reasons if gate else [trace.evaluation.status.value])
                if guards.STALE_OUTPUT in codes:
                    weak.append(w.uuid)
                for r in codes:
                    if r not in reasons:
                        reasons.append(r)
    except Exception as exc:
        return CanaryResult(full.short, kind, ERROR, detail=f"{type(exc).__name__}: {exc}",
                            seconds=time.perf_counter() - started)
    finally:
        session.close()
    if passed:
        detail = f"tolerance broken: the {kind} canary passed {passed}"
        return CanaryResult(full.short, kind, PASS, reasons, n, detail, time.perf_counter() - started)
    if weak:
        detail = (f"weak: the {kind} canary passed the correctness trials of {weak} and was caught only by a "
                  "sampled timed iteration (the reference output is trivial for many seeds)")
    return CanaryResult(full.short, kind, REJECT, reasons, n, detail, time.perf_counter() - started)


def run_canaries(device: str = "cpu", names: Optional[List[str]] = None, out_root: Optional[Path] = None,
                 jobs: int = 2, kinds: Optional[List[str]] = None,
                 on_result: Callable[[CanaryResult], None] = lambda r: None) -> List[CanaryResult]:
    """Every canary (``kinds_for``; only ``kinds`` when given) on every built-in definition
    (``names``: short names; default all), at quick sizes; ``on_result`` is called with each
    result as it ends."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from kernelwright import definitions
    from kernelwright.redteam.runner import _prepare_parent, private_cache

    names = names or [b.short for b in definitions.all_builtins()]
    root = Path(out_root) if out_root else Path(tempfile.mkdtemp(prefix="kw-canaries-"))
    jobs_list = [(n, k) for n in names for k in kinds_for(n) if kinds is None or k in kinds]
    with private_cache():
        _prepare_parent()
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = []
            for res in pool.map(lambda nk: run_canary(nk[0], nk[1], device, root), jobs_list):
                results.append(res)
                on_result(res)
            return results
