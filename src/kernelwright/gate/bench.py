"""Run many solutions over many workloads through the gate, interleaved per workload.

For each definition, one worker per solution stays up for the whole run; for each workload the
parent prepares the inputs and references once (``WorkloadContext``) and evaluates every
solution on them in turn, so that shipped solutions and baselines are measured on the same
inputs with the same timer.  Each trace is appended to ``<out>/traces/<definition>.jsonl`` as
soon as it exists: nothing already computed is lost if the run is interrupted.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple

from kernelwright import definitions
from kernelwright.definitions.base import BuiltinDefinition
from kernelwright.gate.evaluate import GateConfig, SolutionRun, WorkloadContext, evaluate, time_only
from kernelwright.gate.session import Timeouts, WorkerSession, focus
from kernelwright.trace import Solution, Trace, Workload
from kernelwright.trace.jsonio import append_jsonl


@dataclass
class Candidate:
    """A solution entered in a bench run."""

    solution: Solution
    label: str
    role: str = "solution"          # "solution" | "baseline" | "lower_bound"
    trusted: bool = False           # baselines: may declare an untimed prepare step
    prepare: Optional[str] = None
    requires_kernel: bool = True
    skip_reason: Optional[str] = None


@dataclass
class BenchPlan:
    builtin: BuiltinDefinition
    workloads: List[Workload]
    candidates: List[Candidate]


@dataclass
class BenchRun:
    out_dir: Path
    traces: Dict[str, List[Trace]] = field(default_factory=dict)   # definition -> traces
    lower_bounds: Dict[str, Dict[str, Dict[str, float]]] = field(default_factory=dict)
    seconds: float = 0.0


ProgressHook = Callable[[str, int, int], None]  # (description, done, total)


def evaluations(builtin: BuiltinDefinition, workloads: Iterable[Workload], cfg: GateConfig,
                runs: Sequence[SolutionRun], lower_bound: Callable[[SolutionRun], bool] = lambda run: False,
                before: Optional[Callable[[Workload, SolutionRun], None]] = None,
                pause_others: bool = False) -> Iterator[Tuple[Workload, SolutionRun, Any]]:
    """The gate's evaluation loop.  For each workload one ``WorkloadContext`` (its inputs and
    references prepared once, shared by every run in order, released before the next workload or
    when the caller stops early); on it each run, after ``before(workload, run)``: ``evaluate``,
    or for a ``lower_bound`` run ``time_only``.  Yields (workload, run, its Trace or latency in ms).
    With ``pause_others`` every other run's worker is paused meanwhile (``session.focus``: only for
    runs used one at a time, as in one bench run).

    The runs, and closing their sessions, stay with the caller: ``run_bench`` opens one per
    candidate for a whole plan, the red-team runner one per case (with a companion and a
    hidden-split pass on its own), the canaries one per canary.  The cluster's ``JobRunner`` keeps
    its own loop: one workload per job, sessions kept between jobs and made as each candidate's
    turn comes (after its ``started`` event)."""
    for workload in workloads:
        ctx = WorkloadContext(builtin, workload, cfg)
        try:
            for run in runs:
                if before is not None:
                    before(workload, run)
                if pause_others:
                    focus([r.session for r in runs], run.session)   # the others' workers are stopped
                yield workload, run, time_only(run, ctx) if lower_bound(run) else evaluate(run, ctx)
        finally:
            ctx.release()


def run_bench(plans: List[BenchPlan], cfg: GateConfig, out_dir: Path, timeouts: Optional[Timeouts] = None,
              progress: Optional[ProgressHook] = None, trace_file_suffix: str = "") -> BenchRun:
    """Evaluate every candidate of every plan on every workload of the plan."""
    out_dir = Path(out_dir)
    (out_dir / "traces").mkdir(parents=True, exist_ok=True)
    result = BenchRun(out_dir=out_dir)
    started = time.perf_counter()
    total = sum(len(p.workloads) * sum(1 for c in p.candidates if not c.skip_reason) for p in plans)
    done = 0
    write_roster(plans, out_dir)
    for plan in plans:
        name = plan.builtin.name
        trace_path = out_dir / "traces" / f"{name}{trace_file_suffix}.jsonl"
        runs = []
        protect = _protected(plan, out_dir)
        for cand in plan.candidates:
            if cand.skip_reason:
                continue
            session = WorkerSession(cand.solution, cfg.device, timeouts, trusted=cand.trusted,
                                    prepare=cand.prepare, log_dir=out_dir / "logs", protect=protect,
                                    data_files=definitions.data_files(plan.builtin, plan.workloads),
                                    results_dir=out_dir)
            runs.append((cand, SolutionRun(session, requires_kernel=cand.requires_kernel, label=cand.label,
                                           warnings=static_warnings(cand))))
        candidate = {id(srun): cand for cand, srun in runs}

        def before(workload: Workload, srun: SolutionRun) -> None:
            if progress:
                progress(f"{plan.builtin.short}: {candidate[id(srun)].label} on {workload.uuid[:8]}", done, total)

        try:
            for workload, srun, judged in evaluations(plan.builtin, plan.workloads, cfg, [r for _, r in runs],
                                                      lower_bound=lambda r: candidate[id(r)].role == "lower_bound",
                                                      before=before, pause_others=True):
                cand = candidate[id(srun)]
                if cand.role == "lower_bound":
                    result.lower_bounds.setdefault(name, {}).setdefault(cand.solution.name, {})[workload.uuid] = judged
                    (out_dir / "lower_bounds.json").write_text(json.dumps(result.lower_bounds, indent=1))
                else:
                    append_jsonl([judged], trace_path)
                    result.traces.setdefault(name, []).append(judged)
                done += 1
        finally:
            for _, srun in runs:
                srun.session.close()
    if progress:
        progress("done", done, total)
    result.seconds = time.perf_counter() - started
    if result.lower_bounds:
        (out_dir / "lower_bounds.json").write_text(json.dumps(result.lower_bounds, indent=1))
    return result


def _protected(plan: BenchPlan, out_dir: Path) -> List[str]:
    """What no solution of ``plan`` may change: the gate's own protected roots (its sources, cache
    and this results folder) and the definition's and workloads' files outside kernelwright (a
    definition JSON, safetensors blobs)."""
    from kernelwright import definitions
    from kernelwright.gate import guards

    roots = guards.protected_roots(out_dir)
    return roots + [f for f in definitions.data_files(plan.builtin, plan.workloads) if f not in roots]


def write_roster(plans: List[BenchPlan], out_dir: Path) -> None:
    """``candidates.json``: who is who (label, role, definition, skip reason), written before the
    first trace so that the traces of an interrupted run can still be summarised; and each
    definition and solution as FlashInfer-Trace JSON (``definitions/<name>.json``,
    ``solutions/<name>.json``: what ``kernelwright export-traceset`` turns into a TraceSet)."""
    from kernelwright.trace.jsonio import dump_json

    roster = {c.solution.name: {"label": c.label, "role": c.role, "definition": p.builtin.name,
                                "locator": p.builtin.locator, "skip_reason": c.skip_reason}
              for p in plans for c in p.candidates}
    (Path(out_dir) / "candidates.json").write_text(json.dumps(roster, indent=1))
    for p in plans:
        dump_json(p.builtin.definition, Path(out_dir) / "definitions" / f"{p.builtin.name}.json")
        for c in p.candidates:
            if not c.skip_reason:
                dump_json(c.solution, Path(out_dir) / "solutions" / f"{c.solution.name}.json")


def static_warnings(cand: Candidate) -> List[str]:
    """The advisory static-scan findings attached to a candidate's traces (none for trusted baselines)."""
    if cand.trusted:
        return []
    from kernelwright.gate.guards import static_scan

    return [f"{f.code}: {f.message}" for f in static_scan({s.path: s.content for s in cand.solution.sources})]
