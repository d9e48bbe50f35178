"""Canaries: a solution that writes zeros and one that writes a constant must fail EVERY
definition.  If one passes, the definition's tolerance (or its inputs) cannot tell a wrong
answer from a right one, and the gate says so ("tolerance broken").

The canaries are destination-passing solutions generated per definition (they only need the
number of outputs).  They are evaluated with ``requires_kernel=False``: provenance must not be
what rejects them, only the numerical checks.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional

from kernelwright.trace import Solution
from kernelwright.trace.solution import BuildSpec, SourceFile

_TEMPLATE = '''"""Canary ({kind}) for {definition}: writes {what} into every output, launches nothing."""

N_OUT = {n_out}


def run(*args):
    for out in args[-N_OUT:]:
        if out.is_floating_point():
            out.fill_({float_value})
        else:
            out.fill_({int_value})
'''

KINDS = {
    "zeros": {"what": "zeros", "float_value": "0.0", "int_value": "0"},
    "constant": {"what": "a constant (1.0; -1 for integer outputs)", "float_value": "1.0", "int_value": "-1"},
}


def canary_solution(definition_name: str, n_outputs: int, kind: str) -> Solution:
    spec = KINDS[kind]
    text = _TEMPLATE.format(kind=kind, definition=definition_name, n_out=n_outputs, **spec)
    return Solution(name=f"canary_{kind}_{definition_name}", definition=definition_name, author="kernelwright-canary",
                    spec=BuildSpec(language="python", target_hardware=["any"], entry_point="kernel.py::run",
                                   destination_passing_style=True),
                    sources=[SourceFile(path="kernel.py", content=text)],
                    description=f"canary: {spec['what']}")


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
        return self.verdict == "REJECT"

    def as_dict(self) -> Dict:
        return {"definition": self.definition, "kind": self.kind, "verdict": self.verdict, "reasons": self.reasons,
                "workloads": self.workloads, "ok": self.ok, "detail": self.detail, "seconds": round(self.seconds, 2)}


def run_canary(builtin_name: str, kind: str, device: str, out_root: Path, cfg=None) -> CanaryResult:
    """Evaluate one canary on every quick workload of a definition; it must fail all of them."""
    from kernelwright import definitions
    from kernelwright.gate.evaluate import SolutionRun, WorkloadContext, evaluate
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
    sol = canary_solution(full.name, len(full.definition.outputs), kind)
    session = WorkerSession(sol, cfg.device, log_dir=Path(out_root) / f"canary-{kind}-{full.short}" / "logs")
    run = SolutionRun(session, requires_kernel=False, label=sol.name)
    passed, reasons, detail, n = [], [], "", 0
    weak: List[str] = []   # workloads where the canary passed the correctness trials
    try:
        for w in quick.public_workloads():
            ctx = WorkloadContext(quick, w, cfg)
            trace = evaluate(run, ctx)
            ctx.release()
            n += 1
            if trace.passed:
                passed.append(w.uuid)
            else:
                gate = trace.evaluation.gate
                codes = list(gate.reasons if gate else [trace.evaluation.status.value])
                if "STALE_OUTPUT" in codes:
                    weak.append(w.uuid)
                for r in codes:
                    if r not in reasons:
                        reasons.append(r)
    except Exception as exc:
        return CanaryResult(full.short, kind, "ERROR", detail=f"{type(exc).__name__}: {exc}",
                            seconds=time.perf_counter() - started)
    finally:
        session.close()
    if passed:
        detail = f"tolerance broken: the {kind} canary passed {passed}"
        return CanaryResult(full.short, kind, "PASS", reasons, n, detail, time.perf_counter() - started)
    if weak:
        detail = (f"weak: the {kind} canary passed the correctness trials of {weak} and was caught only by a "
                  "sampled timed iteration (the reference output is trivial for many seeds)")
    return CanaryResult(full.short, kind, "REJECT", reasons, n, detail, time.perf_counter() - started)


def run_canaries(device: str = "cpu", names: Optional[List[str]] = None, out_root: Optional[Path] = None,
                 jobs: int = 2) -> List[CanaryResult]:
    """Both canaries on every built-in definition (quick sizes)."""
    import tempfile
    from concurrent.futures import ThreadPoolExecutor

    from kernelwright import definitions
    from kernelwright.redteam.runner import _prepare_parent, private_cache

    names = names or [b.short for b in definitions.all_builtins()]
    root = Path(out_root) if out_root else Path(tempfile.mkdtemp(prefix="kw-canaries-"))
    jobs_list = [(n, k) for n in names for k in KINDS]
    with private_cache():
        _prepare_parent()
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            return list(pool.map(lambda nk: run_canary(nk[0], nk[1], device, root), jobs_list))
