"""How far are the shipped solutions and the near-miss canaries from the strict verdict's thresholds
(gate/checkers.py)?

Exit status 1 when a shipped solution fails a check or a canary passes one it applies to; run it
again whenever a solution, a candidate or a tolerance changes.

    python experiments/strict_margins.py                          # CPU, quick sizes, shipped solutions + canaries
    python experiments/strict_margins.py --device cuda --full --seeds 3 --json out.json   # contest sizes (GPU)

For each built-in definition, workload and seed: the gate's inputs and reference (``make_inputs``,
``reference``), then every shipped solution called in-process (not through the worker: this
measures numerics, not speed, and needs no guards) and every near-miss canary's damaged outputs
(``redteam.canaries.damaged_outputs``), each judged by ``check_outputs`` with the definition's
tolerance.  One row per (definition, entry): the worst strict errors over all checks, the
threshold, the margin (threshold / worst error; > 1 passes, for a canary < 1 rejects), and how
many checks each rule passed.

``--full`` uses ``--limit`` contest workloads of each definition at full size, spread over the set
(the first, the last and evenly between), instead of the quick ones; that needs a GPU.
"""

from __future__ import annotations

import argparse
import importlib
import json
import math
import sys
from pathlib import Path
from typing import Any, Dict, List

import torch

if not torch.cuda.is_available():
    import os

    os.environ.setdefault("TRITON_INTERPRET", "1")   # before triton is imported (CPU: the interpreter)

from kernelwright import definitions  # noqa: E402
from kernelwright.gate.checkers import check_outputs, strict_violation, worst_strict  # noqa: E402
from kernelwright.gate.evaluate import normalize_outputs  # noqa: E402
from kernelwright.inputs import make_generator  # noqa: E402
from kernelwright.redteam.canaries import NEAR_MISSES, damaged_outputs, kinds_for  # noqa: E402
from kernelwright.solutions import SHIPPED_ROOT, shipped_solutions  # noqa: E402


def _entry(sol):
    """The shipped solution's callable, imported from its package folder."""
    folder = next(p.parent.name for p in SHIPPED_ROOT.glob("*/manifest.json")
                  if json.loads(p.read_text())["name"] == sol.name)
    module = importlib.import_module(f"kernelwright.solutions.{folder}.{sol.spec.entry_file[:-3].replace('/', '.')}")
    return getattr(module, sol.spec.entry_symbol)


class Tally:
    """The checks of one entry (a shipped solution or a canary) on one definition."""

    def __init__(self, role: str):
        self.role = role
        self.checks: List[Any] = []
        self.identical = 0   # canary draws whose damaged outputs equal the reference (not checks)

    def counts(self, tol) -> Dict[str, int]:
        """How many checks each rule passed (the strict rule counted on its own errors, also where
        the contest rule had already failed), and how many passed both."""
        def strict_ok(check) -> bool:
            return tol.strict is None or all(strict_violation(n, e, tol.strict) is None for n, e in check.strict.items())
        return {"checks": len(self.checks), "contest_passed": sum(c.failed_rule != "contest" for c in self.checks),
                "strict_passed": sum(strict_ok(c) for c in self.checks), "both_passed": sum(c.passed for c in self.checks)}


def main(argv: List[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--full", action="store_true", help="contest workloads at full size instead of the quick ones")
    ap.add_argument("--limit", type=int, default=4, help="with --full: workloads per definition (spread over the set)")
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--definition", "-d", action="append", help="short names (default: every built-in)")
    ap.add_argument("--no-canaries", action="store_true")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args(argv)
    device = torch.device(args.device)
    shorts = args.definition or [b.short for b in definitions.all_builtins()]
    rows, bad = [], []
    for short in shorts:
        full = definitions.get(short)
        builtin = full if args.full else full.quick_variant()
        workloads = builtin.public_workloads()
        if args.full and len(workloads) > args.limit:
            step = (len(workloads) - 1) / max(1, args.limit - 1)
            workloads = [workloads[round(i * step)] for i in range(args.limit)]
        tol = builtin.tolerance
        entries = {s.name: (_entry(s), s.spec.destination_passing_style) for s in shipped_solutions(full.name)}
        canaries = [] if args.no_canaries else [k for k in kinds_for(short) if k in NEAR_MISSES]
        tallies = {name: Tally("honest") for name in entries}
        tallies.update({f"canary {k}": Tally("canary") for k in canaries})
        for w in workloads:
            for seed in range(args.seeds):
                inputs = builtin.make_inputs(builtin.definition, w, make_generator(1000 + seed, device), device)
                expected = normalize_outputs(builtin.reference(**inputs), builtin.definition.output_names)
                for name, (fn, dps) in entries.items():
                    outs = _call_outputs(builtin, w, fn, dps, inputs, device)
                    tallies[name].checks.append(check_outputs(builtin.checker, outs, expected, tol, inputs))
                for kind in canaries:
                    if not NEAR_MISSES[kind].applies(builtin, w):
                        continue
                    args_ = [inputs[n] for n in builtin.definition.input_names]
                    outs = dict(zip(builtin.definition.output_names, damaged_outputs(short, kind, args_)))
                    if all(_same(outs[n], expected[n]) for n in expected):
                        tallies[f"canary {kind}"].identical += 1   # the damage changed nothing here
                        continue
                    tallies[f"canary {kind}"].checks.append(check_outputs(builtin.checker, outs, expected, tol, inputs))
        for name, t in tallies.items():
            counts = t.counts(tol)
            errors = {o: {k: v for k, v in e.items() if v is not None} for o, e in worst_strict(t.checks).items()}
            row = {"definition": short, "entry": name, "role": t.role, **counts, "identical": t.identical,
                   "errors": errors,
                   "thresholds": {"max_rel_l2": tol.strict.max_rel_l2, "max_row_rel_l2": tol.strict.max_row_rel_l2}
                   if tol.strict else None}
            if tol.strict:
                worst = max([e.get("rel_l2", 0.0) for e in errors.values()] or [0.0])
                worst_row = max([e.get("row_rel_l2", 0.0) for e in errors.values()] or [0.0])
                row["margin_rel_l2"] = tol.strict.max_rel_l2 / worst if worst > 0 else math.inf
                row["margin_row_rel_l2"] = (tol.strict.max_row_rel_l2 / worst_row
                                            if tol.strict.max_row_rel_l2 and worst_row > 0 else math.inf)
            rows.append(row)
            if (t.role == "honest" and counts["both_passed"] < counts["checks"]) or (t.role == "canary" and counts["both_passed"]):
                bad.append(f"{short} {name}")
            errs = "  ".join(f"{o}: " + ", ".join(f"{k} {v:.3g}" for k, v in e.items()) for o, e in errors.items())
            print(f"{short:9s} {name:34s} checks {counts['checks']:3d}  contest {counts['contest_passed']:3d}  "
                  f"strict {counts['strict_passed']:3d}  both {counts['both_passed']:3d}  (same as ref {t.identical})  "
                  f"| {errs}  | margin rel {row.get('margin_rel_l2', float('nan')):.3g} "
                  f"row {row.get('margin_row_rel_l2', float('nan')):.3g}", flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"command": " ".join(sys.argv), "device": str(device), "full": args.full,
                                         "seeds": args.seeds, "rows": rows}, indent=1, default=str) + "\n")
    if bad:
        print("UNEXPECTED: " + "; ".join(bad))
        return 1
    return 0


def _same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bitwise equal, NaN included (a damaged output that is still the reference's)."""
    return a.shape == b.shape and a.dtype == b.dtype and bool((a.view(torch.uint8) if a.element_size() == 1 else a)
                                                              .eq(b.view(torch.uint8) if b.element_size() == 1 else b).all())


def _call_outputs(builtin, workload, fn, dps, inputs, device) -> Dict[str, torch.Tensor]:
    d = builtin.definition
    args = [inputs[n] for n in d.input_names]
    if not dps:
        return normalize_outputs(fn(*args), d.output_names)
    from kernelwright.trace import torch_dtype

    outs = {}
    for name, spec in d.outputs.items():
        dtype = torch_dtype(spec.dtype)
        fill = float("nan") if dtype.is_floating_point else -(2**31 - 1)
        outs[name] = torch.full(tuple(d.shape_of(name, workload.axes)), fill, dtype=dtype, device=device)
    fn(*args, *outs.values())
    return outs


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
