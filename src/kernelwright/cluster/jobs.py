"""Evaluation jobs: what a pool worker is given, what comes back.

A job is ONE workload of ONE definition with the candidates to evaluate on it (one or
many).  The worker that takes it prepares the workload's inputs and references once
(``WorkloadContext``) and evaluates the candidates one after another on that device, so every
candidate of a job is judged on the same inputs with the same timer, exactly as in the
sequential ``run_bench``.  See docs/cluster.md ("Job granularity") for why.

Jobs cross process (and, with Ray, machine) boundaries as plain JSON-able dicts ("wire" form):
the definition travels by locator (``BuiltinDefinition.locator``), solutions, workloads and
traces as their JSON.
"""

from __future__ import annotations

import base64
import dataclasses
import itertools
import pickle
import threading
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Dict, List, Optional

from kernelwright.definitions.base import BuiltinDefinition
from kernelwright.gate.bench import BenchPlan, Candidate
from kernelwright.gate.evaluate import GateConfig
from kernelwright.gate.session import Timeouts
from kernelwright.trace import Environment, Evaluation, EvaluationStatus, GateReport, Trace, Workload

POOL_WORKER_CRASHED = "POOL_WORKER_CRASHED"   # reason code: the trusted per-GPU process died twice
JOB_ERROR = "POOL_JOB_ERROR"                  # the trusted side raised (e.g. a reference failed)

_ids = itertools.count(1)
_ids_lock = threading.Lock()


def _next_id() -> str:
    with _ids_lock:
        return f"job-{next(_ids):06d}"


@dataclass
class EvalJob:
    """One workload of one definition, with the candidates to evaluate on it.

    ``tag`` is the submitter's own reference (returned untouched in ``JobResult``).
    ``log_dir``: where the gate workers' logs go (local pool only; Ray workers log on their node).
    """

    builtin: BuiltinDefinition
    workload: Workload
    candidates: List[Candidate]
    cfg: GateConfig
    timeouts: Optional[Timeouts] = None
    log_dir: Optional[Path] = None
    tag: Any = None
    job_id: str = field(default_factory=_next_id)

    @property
    def label(self) -> str:
        return f"{self.builtin.short}/{self.workload.uuid[:12]}"

    def active(self) -> List[int]:
        """Indices of the candidates that run (skipped candidates never do)."""
        return [i for i, c in enumerate(self.candidates) if not c.skip_reason]


@dataclass
class JobResult:
    """What a job produced.  ``traces`` holds one trace per non-lower-bound candidate, in
    candidate order; ``lower_bounds`` maps a lower-bound solution's name to its latency (None
    when it failed to run)."""

    job: EvalJob
    traces: List[Trace] = field(default_factory=list)
    lower_bounds: Dict[str, Optional[float]] = field(default_factory=dict)
    attempts: int = 1
    devices: List[str] = field(default_factory=list)       # device label per attempt
    seconds: float = 0.0
    crashes: List[str] = field(default_factory=list)        # what happened to the lost attempts

    @property
    def tag(self) -> Any:
        return self.job.tag


class JobError(RuntimeError):
    """The trusted side of a job failed (not the solution): e.g. the reference raised."""


def jobs_from_plans(plans: List[BenchPlan], cfg: GateConfig, timeouts: Optional[Timeouts] = None,
                    log_dir: Optional[Path] = None) -> List[EvalJob]:
    """One job per (plan, workload), in the sequential runner's order; tag = (plan index,
    workload index)."""
    jobs = []
    for p, plan in enumerate(plans):
        cands = [c for c in plan.candidates if not c.skip_reason]
        if not cands:
            continue
        for w, workload in enumerate(plan.workloads):
            jobs.append(EvalJob(plan.builtin, workload, cands, cfg, timeouts, log_dir, tag=(p, w)))
    return jobs


# -- definitions across processes ----------------------------------------------------------
_ref_cache: Dict[tuple, tuple] = {}     # key -> (builtin kept alive so its id stays unique, ref)
_ref_lock = threading.Lock()


def definition_ref(builtin: BuiltinDefinition) -> Dict[str, Any]:
    """How a worker finds ``builtin`` again: its locator when that resolves to the same
    definition (every built-in, quick variants, ``module:ATTR`` user definitions), else a
    pickle of it.  Raises ValueError when neither works."""
    key = (builtin.locator, builtin.name, id(builtin))
    with _ref_lock:
        if key in _ref_cache:
            return _ref_cache[key][1]
    from kernelwright import definitions

    ref: Optional[Dict[str, Any]] = None
    try:
        found = definitions.resolve(builtin.locator)
        if found.name == builtin.name and found.definition == builtin.definition:
            ref = {"locator": builtin.locator, "name": builtin.name}
    except Exception:
        ref = None
    if ref is None:
        try:
            blob = pickle.dumps(builtin)
        except Exception as exc:
            raise ValueError(
                f"definition {builtin.name!r} cannot be sent to a pool worker: its locator "
                f"{builtin.locator!r} does not resolve to it and it does not pickle ({type(exc).__name__}); "
                "give it ref='package.module:ATTRIBUTE'") from exc
        ref = {"locator": None, "name": builtin.name, "pickle": base64.b64encode(blob).decode()}
    with _ref_lock:
        _ref_cache[key] = (builtin, ref)
    return ref


def load_definition_ref(ref: Dict[str, Any]) -> BuiltinDefinition:
    from kernelwright import definitions

    if ref.get("locator"):
        found = definitions.resolve(ref["locator"])
    else:
        found = pickle.loads(base64.b64decode(ref["pickle"]))
    if found.name != ref["name"]:
        raise JobError(f"definition locator {ref.get('locator')!r} resolved to {found.name!r}, not {ref['name']!r}")
    return found


# -- wire form -----------------------------------------------------------------------------
def candidate_wire(index: int, cand: Candidate) -> Dict[str, Any]:
    return {"index": index, "solution": cand.solution.model_dump_json(), "label": cand.label, "role": cand.role,
            "trusted": cand.trusted, "prepare": cand.prepare, "requires_kernel": cand.requires_kernel}


def job_wire(job: EvalJob, skip: Optional[List[int]] = None, attempt: int = 1) -> Dict[str, Any]:
    """The job as a JSON-able dict (``skip``: candidate indices already reported)."""
    skip = set(skip or [])
    return {
        "job_id": job.job_id,
        "attempt": attempt,
        "definition": definition_ref(job.builtin),
        "workload": job.workload.model_dump_json(),
        "candidates": [candidate_wire(i, job.candidates[i]) for i in job.active() if i not in skip],
        "cfg": dataclasses.asdict(job.cfg),
        "timeouts": dataclasses.asdict(job.timeouts) if job.timeouts else None,
        "log_dir": str(job.log_dir) if job.log_dir else None,
    }


# -- traces the parent writes itself --------------------------------------------------------
def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def failure_trace(job: EvalJob, index: int, reason: str, log: str, environment: Optional[Environment],
                  device: Optional[str] = None) -> Trace:
    """A RUNTIME_ERROR trace for candidate ``index`` of ``job`` (the trusted side failed)."""
    env = environment or Environment(hardware=f"unknown ({device or 'device'})", libs={})
    gate = GateReport(reasons=[reason], split=job.cfg.split, trials=job.cfg.trials,
                      notes={"cluster": {"device": device, "reason": reason}})
    evaluation = Evaluation(status=EvaluationStatus.RUNTIME_ERROR, environment=env, timestamp=_now(),
                            log=log[-20000:], gate=gate)
    return Trace(definition=job.builtin.name, workload=job.workload, solution=job.candidates[index].solution.name,
                 evaluation=evaluation)
