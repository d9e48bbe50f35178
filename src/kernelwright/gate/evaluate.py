"""Evaluate one solution on one workload: correctness trials, guards, timing, verdict -> Trace.

The parent prepares a ``WorkloadContext`` once per workload (trial inputs, reference outputs,
the seeds of the timed iterations and the references of the sampled ones, the reference's
latency and the roofline work) and shares it across every solution of a bench run, so that all
of them are judged on the same inputs with the same timer.

The guards (reason codes in ``guards.REASONS``, described in docs/gate.md) run outside the
timed region: the worker only reports raw observations (samples, thread/child counts, Triton
launches, replaced functions), and every decision is taken here, in the parent.
"""

from __future__ import annotations

import math
import os
import random
import statistics
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any, Dict, List, Optional, Tuple

import torch

from kernelwright.definitions.base import BuiltinDefinition, Tolerance, WorkloadProblem
from kernelwright.definitions.fixed import fixed_names
from kernelwright.gate import fresh, guards, integrity
from kernelwright.gate import timing as T
from kernelwright.gate.checkers import CheckResult, check_outputs, worst_strict
from kernelwright.gate.device_info import ceilings_for_run, resolve_device
from kernelwright.gate.environment import environment
from kernelwright.gate.headline import ClockTrials, cupti_span_reference, graph_agreement
from kernelwright.gate.headline import phase_pairs as headline_phase_pairs
from kernelwright.gate.session import WorkerSession
from kernelwright.diagnostics import clip
from kernelwright.trace import record
from kernelwright.inputs import make_generator, seed_for
from kernelwright.trace import (
    Correctness, Evaluation, EvaluationStatus, GateReport, KernelRecord, Performance, Trace, Workload,
)


@dataclass
class GateConfig:
    """How the gate measures.  Defaults follow flashinfer-bench (10 warm-up, 50 timed
    iterations, 3 trials, median per trial, mean over trials, cold L2)."""

    device: str = "cuda"
    warmup: int = 10
    iterations: int = 50
    trials: int = 3
    reference_warmup: int = 1
    reference_iterations: int = 5
    buffer_sets: int = 2
    samples_per_trial: int = 2
    graph_iterations: int = 20
    cupti_iterations: int = 8
    guards: bool = True           # False: --fast-unsafe (no fresh inputs per iteration, samples, determinism)
    split: str = "public"
    salt: str = "kernelwright-public"
    # drawn per run (os.urandom) and mixed into every input seed, so no solution can compute the
    # inputs of its timed iterations in advance (red-team case ``predict_inputs``); recorded in each
    # trace's gate notes (``input_nonce``), and a run with the same nonce reproduces the inputs
    nonce: str = field(default_factory=lambda: os.urandom(8).hex())
    # True (``--contest-rule``): every check judged by the FlashInfer-Bench rule alone; the strict
    # errors are still computed and recorded (``Tolerance.contest_only``, gate/checkers.py)
    contest_rule: bool = False
    # --atol / --rtol / --required-matched-ratio: each one set replaces that term of every
    # definition's (contest-rule) tolerance (recorded in every trace; a looser one marks the table row)
    atol: Optional[float] = None
    rtol: Optional[float] = None
    required_matched_ratio: Optional[float] = None

    def tolerance_for(self, default: "Tolerance") -> "Tolerance":
        """``default`` (a definition's tolerance) with this run's overrides applied."""
        import dataclasses

        terms = {k: getattr(self, k) for k in ("atol", "rtol", "required_matched_ratio") if getattr(self, k) is not None}
        return dataclasses.replace(default, **terms) if terms else default

    @classmethod
    def preset(cls, device: str, quick: bool = False, **overrides: Any) -> "GateConfig":
        """flashinfer-bench's defaults, or with ``quick`` the reduced counts of ``--quick`` (2 warm-up,
        5 timed, 5 graph, 3 CUPTI, 2 reference iterations); every override that is not None wins."""
        cfg = cls(device=device)
        if quick:
            cfg.warmup, cfg.iterations, cfg.graph_iterations, cfg.cupti_iterations = 2, 5, 5, 3
            cfg.reference_iterations = 2
        for key, value in overrides.items():
            if value is not None:
                setattr(cfg, key, value)
        return cfg


def normalize_outputs(returned: Any, names: List[str]) -> Dict[str, torch.Tensor]:
    """A reference's return value (tensor, tuple/list or dict) as {output name: tensor}."""
    if isinstance(returned, dict):
        return {n: returned[n] for n in names}
    if isinstance(returned, (tuple, list)):
        if len(returned) != len(names):
            raise ValueError(f"reference returned {len(returned)} outputs, expected {len(names)}")
        return dict(zip(names, returned))
    if len(names) != 1:
        raise ValueError("reference returned one tensor for several outputs")
    return {names[0]: returned}


@dataclass
class Trial:
    inputs: Dict[str, Any]
    expected: Dict[str, torch.Tensor]


@dataclass
class TimingPlan:
    """One candidate's timed iterations on one workload: per trial the seeds, the input specs
    (with one twin of an earlier iteration, gate/fresh.py), the forced checks (the twin) and how
    many more the parent draws after each call; the graph replays' seeds and which replay is
    checked.  Every seed mixes the run's nonce with ``candidate``."""

    candidate: str
    timing_seeds: List[List[int]]
    timing_specs: List[List[Any]]
    twins: List[Optional[int]]
    sample_plan: List[Dict[int, int]]
    random_samples: List[int]
    graph_seeds: List[int]
    graph_plan: Dict[int, int]

    @classmethod
    def draw(cls, ctx: "WorkloadContext", candidate: str) -> "TimingPlan":
        cfg = ctx.cfg
        base = (cfg.salt, cfg.split, ctx.workload.uuid, cfg.nonce) + ((candidate,) if candidate else ())
        n = cfg.warmup + cfg.iterations
        seeds_all = [[seed_for(*base, "iter", t, i) for i in range(n)] for t in range(cfg.trials)]
        rng = random.Random(seed_for(*base, "samples"))
        k = min(cfg.samples_per_trial, cfg.iterations) if cfg.guards else 0
        specs_all, twins, plan, random_samples = [], [], [], []
        for t in range(cfg.trials):
            seeds = seeds_all[t]
            specs, twin = (fresh.plan_trial(seeds, cfg.warmup, ctx.nsets, ctx.input_meta,
                                            ctx.builtin.tolerance.required_matched_ratio, rng,
                                            seed_for(*base, "twin", t), fixed=ctx.fixed)
                           if cfg.guards and k else (list(seeds), None))
            forced = {} if twin is None else {twin: 0}
            specs_all.append(specs)
            twins.append(twin)
            plan.append(forced)
            # the other checked iterations are drawn by the parent after each call returns
            # (_TimingConversation): no call can know in advance whether it is checked
            random_samples.append(max(0, min(k - len(forced), cfg.iterations - len(forced))))
        graph_seeds = [seed_for(*base, "graph", i) for i in range(cfg.graph_iterations)]
        graph_plan = {it: max(k, 1) + j for j, it in enumerate(sorted(rng.sample(range(len(graph_seeds)),
                                                                      min(1 if cfg.guards else 0, len(graph_seeds)))))}
        return cls(candidate, seeds_all, specs_all, twins, plan, random_samples, graph_seeds, graph_plan)


def candidate_key(run: "SolutionRun") -> str:
    """The identity a candidate's timed inputs are drawn for: its name and content hash."""
    solution = run.session.solution
    try:
        digest = solution.content_hash()
    except Exception:
        digest = ""
    return f"{solution.name}:{digest}"


class WorkloadContext:
    """Parent-side state for one workload, shared by every solution evaluated on it: the
    correctness trials and their references, the reference's latency, the roofline work.  The
    timed inputs are drawn per candidate (``plan_for``)."""

    def __init__(self, builtin: BuiltinDefinition, workload: Workload, cfg: GateConfig):
        self.default_tolerance = builtin.tolerance
        if cfg.contest_rule:
            builtin = builtin.with_contest_rule()
        judged = cfg.tolerance_for(builtin.tolerance)
        if judged != builtin.tolerance:
            import dataclasses

            builtin = dataclasses.replace(builtin, tolerance=judged)
        self.builtin = builtin
        self.workload = workload
        self.cfg = cfg
        self.device = resolve_device(cfg.device)
        self.definition = builtin.definition
        self.axes = self.definition.axis_values(workload.axes)
        self.input_meta = [(n, None if s.shape is None else list(self.definition.shape_of(n, workload.axes)),
                            _torch_name(s.dtype)) for n, s in self.definition.inputs.items()]
        self.output_meta = [(n, list(self.definition.shape_of(n, workload.axes)), _torch_name(s.dtype))
                            for n, s in self.definition.outputs.items()]
        # safetensors inputs: the same tensor in every trial and iteration (definitions/fixed.py)
        self.fixed = fixed_names(workload)
        self._trials: Optional[List[Trial]] = None
        self._problem: Optional[WorkloadProblem] = None
        self._sample_refs: Dict[int, Trial] = {}
        self._ref_latency: Optional[float] = None
        self._roofline = None
        self._flusher: Optional[T.L2Flusher] = None
        self.nsets = max(2, cfg.buffer_sets)
        self._plans: Dict[str, "TimingPlan"] = {}

    def plan_for(self, candidate: str) -> "TimingPlan":
        """The timed inputs of one candidate on this workload (``TimingPlan``): drawn from the
        run's nonce and the candidate's identity, so no two candidates of a run are timed on the
        same inputs and none can replay another's recorded outputs (issue 22, class 4).  The
        correctness trials and their references stay shared (``trials``)."""
        if candidate not in self._plans:
            self._plans[candidate] = TimingPlan.draw(self, candidate)
        return self._plans[candidate]

    # the plan of the anonymous candidate "" (tests, tools that time one thing)
    timing_seeds = property(lambda self: self.plan_for("").timing_seeds)
    timing_specs = property(lambda self: self.plan_for("").timing_specs)
    twins = property(lambda self: self.plan_for("").twins)
    sample_plan = property(lambda self: self.plan_for("").sample_plan)
    random_samples = property(lambda self: self.plan_for("").random_samples)
    graph_seeds = property(lambda self: self.plan_for("").graph_seeds)
    graph_plan = property(lambda self: self.plan_for("").graph_plan)

    # -- inputs and references -------------------------------------------------------------
    def generate(self, seed: int) -> Trial:
        inputs = self.builtin.make_inputs(self.definition, self.workload, make_generator(seed, self.device), self.device)
        expected = normalize_outputs(self.builtin.reference(**inputs), self.definition.output_names)
        return Trial(inputs, expected)

    @property
    def trials(self) -> List[Trial]:
        if self._trials is None:
            self._trials = [self.generate(seed_for(self.cfg.salt, self.cfg.split, self.workload.uuid, self.cfg.nonce,
                                                   "trial", t))
                            for t in range(self.cfg.trials)]
        return self._trials

    def fresh_note(self) -> Optional[str]:
        """What fresh inputs per iteration could not vary here (None without fixed inputs): the
        workload's safetensors inputs stay fixed, as in flashinfer-bench; without any random
        floating-point input left there is no twin."""
        if not self.fixed:
            return None
        note = f"{', '.join(self.fixed)} fixed by the workload (safetensors): the same in every trial and iteration"
        if fresh.twin_target(self.input_meta, self.fixed) is None:
            note += ("; no random floating-point input is left, so no twin: an output cache keyed on the "
                     "inputs cannot be told apart")
        return note

    def problem(self) -> Optional[WorkloadProblem]:
        """Why this workload cannot be evaluated (a missing blob or tensor key, a shape or dtype
        other than the definition's, a constraint the inputs break, a reference that raises), or
        None.  Found by preparing the trials, once per workload, before any worker is asked."""
        if self._problem is None and self._trials is None:
            try:
                self.trials
            except WorkloadProblem as exc:
                self._problem = exc
        return self._problem

    def inputs_of(self, spec) -> Dict[str, Any]:
        """The inputs of a timed iteration's spec (``fresh.expand``), generated here."""
        return fresh.expand(self.builtin, self.workload, spec, self.device)

    def sample_trial(self, spec) -> Trial:
        key = fresh.key(spec)
        if key not in self._sample_refs:
            inputs = self.inputs_of(spec)
            trial = Trial(inputs, normalize_outputs(self.builtin.reference(**inputs), self.definition.output_names))
            if self.builtin.checker != "topk_indices":  # only the indexer checker needs the inputs
                trial = Trial({}, trial.expected)
            self._sample_refs[key] = trial
        return self._sample_refs[key]

    def scalars(self, trial: Trial) -> Dict[str, Any]:
        return {n: trial.inputs[n] for n, shape, _ in self.input_meta if shape is None}

    @property
    def flusher(self) -> T.L2Flusher:
        if self._flusher is None:
            self._flusher = T.L2Flusher(self.device)
        return self._flusher

    def reference_latency_ms(self) -> float:
        """Median over iterations (cold L2) of the reference on trial 0's inputs."""
        if self._ref_latency is None:
            inputs = self.trials[0].inputs
            times = []
            for i in range(self.cfg.reference_warmup + self.cfg.reference_iterations):
                self.flusher.flush()
                T.sync(self.device)
                if self.device.type == "cuda":
                    a, b = T.new_event(), T.new_event()
                    T.record(a)
                    self.builtin.reference(**inputs)
                    T.record(b)
                    T.sync(self.device)
                    ms = T.elapsed_ms(a, b)
                else:
                    t0 = T.now_s()
                    self.builtin.reference(**inputs)
                    ms = (T.now_s() - t0) * 1e3
                if i >= self.cfg.reference_warmup:
                    times.append(ms)
            self._ref_latency = float(statistics.median(times))
        return self._ref_latency

    def roofline(self):
        """The mean roofline work over the trials, or None when the definition has no model."""
        if self.builtin.roofline is None:
            return None
        if self._roofline is None:
            from kernelwright.definitions.base import RooflineWork

            self._roofline = RooflineWork.mean([self.builtin.roofline(t.inputs, self.axes) for t in self.trials])
        return self._roofline

    def release(self) -> None:
        self._trials = None
        self._sample_refs.clear()
        self._flusher = None


def _torch_name(dtype) -> str:
    from kernelwright.trace import torch_dtype

    return str(torch_dtype(dtype)).replace("torch.", "")


# ------------------------------------------------------------------------------------------
@dataclass
class SolutionRun:
    """How to evaluate one solution: its worker session and what the gate expects of it."""

    session: WorkerSession
    requires_kernel: bool = True   # False for trusted baselines (vendor kernels by design)
    label: str = ""
    warnings: List[str] = field(default_factory=list)
    compile_failed: Optional[Dict[str, Any]] = None


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def _trace(ctx: WorkloadContext, run: SolutionRun, status: EvaluationStatus, log: str = "",
           correctness: Optional[Correctness] = None, performance: Optional[Performance] = None,
           gate: Optional[GateReport] = None) -> Trace:
    gate = gate or GateReport()
    gate.split = ctx.cfg.split
    boundary = getattr(run.session, "boundary", None)
    if boundary is not None:   # which OS boundary the worker had (gate/sandbox.py)
        gate.notes = {**(gate.notes or {}), "isolation": boundary.as_note()}
    gate.warnings = list(dict.fromkeys(run.warnings + gate.warnings))
    if ctx.cfg.split == "hidden" and status != EvaluationStatus.PASSED and guards.HIDDEN_SPLIT_FAILED not in gate.reasons:
        gate.reasons.append(guards.HIDDEN_SPLIT_FAILED)
    # how it was judged, also where flashinfer-bench's loader keeps it (trace/record.py)
    b = ctx.builtin
    judged = record.judged_by(b.checker, record.tolerance_dict(b.tolerance), record.tolerance_dict(ctx.default_tolerance),
                              {"name": b.name, "origin": b.origin,
                               "locator": None if b.origin == "builtin" and b.blob_root is None else b.locator},
                              ctx.cfg.guards, ctx.cfg.split, gate.suspicious, gate.reasons,
                              rule=getattr(b.tolerance, "rule", None))
    if correctness is not None:
        correctness = correctness.model_copy(update={"extra": {**(correctness.extra or {}), record.EXTRA_KEY: judged}})
    log = record.log_line(judged) + "\n" + log
    evaluation = Evaluation(status=status, environment=environment(ctx.cfg.device), timestamp=_now(),
                            log=log[-5_000_000:], correctness=correctness, performance=performance, gate=gate)
    return Trace(definition=ctx.definition.name, workload=ctx.workload, solution=run.session.solution.name,
                 evaluation=evaluation)


def _failed(ctx, run, reply: Dict[str, Any], gate: Optional[GateReport] = None) -> Trace:
    gate = gate or GateReport()
    reason = reply.get("reason") or reply.get("status")
    if reason:
        gate.reasons.append(reason)
    gate.detail = clip(str(reply.get("line") or _first_line(str(reply.get("error", "")))), DETAIL_WIDTH)
    status = EvaluationStatus(reply.get("status", "RUNTIME_ERROR"))
    return _trace(ctx, run, status, log=str(reply.get("error", "")) + "\n" + run.session.new_log(), gate=gate)


def _rejected(ctx, run, reason: str, message: str, gate: GateReport, check: Optional[CheckResult] = None) -> Trace:
    gate.reasons.append(reason)
    gate.detail = clip(message, DETAIL_WIDTH)
    if check is not None and check.status == EvaluationStatus.INCORRECT_NUMERICAL:
        corr = Correctness(max_absolute_error=_nn(check.max_absolute_error), max_relative_error=_nn(check.max_relative_error),
                           extra={**check.verdict_record(ctx.builtin.tolerance), "reason": reason})
        return _trace(ctx, run, EvaluationStatus.INCORRECT_NUMERICAL, log=message + "\n" + run.session.new_log(),
                      correctness=corr, gate=gate)
    status = check.status if check is not None and check.status != EvaluationStatus.PASSED else EvaluationStatus.RUNTIME_ERROR
    return _trace(ctx, run, status, log=message + "\n" + run.session.new_log(), gate=gate)


DETAIL_WIDTH = 400   # characters of GateReport.detail (one line, cut at a word boundary)


def _first_line(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    return lines[0] if lines else ""


def _workload_failed(ctx, run, problem: WorkloadProblem) -> Trace:
    """The trace of a workload the parent could not prepare (reason WORKLOAD_INPUT or
    REFERENCE_FAILED, status RUNTIME_ERROR): no worker was asked."""
    gate = GateReport(reasons=[problem.reason], detail=clip(str(problem), DETAIL_WIDTH))
    return _trace(ctx, run, EvaluationStatus.RUNTIME_ERROR, log=str(problem), gate=gate)


def _constant_reference(expected: Dict[str, torch.Tensor]) -> bool:
    """True when every output of the reference is one value repeated (a fill could match it)."""
    for ref in expected.values():
        flat = ref.reshape(-1)
        if flat.numel() and not bool((flat == flat[0]).all()):
            return False
    return True


def _nn(x: float) -> float:
    return x if (math.isnan(x) or x >= 0) else abs(x)


def _outputs_of(ctx: WorkloadContext, tensors: List[torch.Tensor]) -> Dict[str, torch.Tensor]:
    return {name: t for (name, _, _), t in zip(ctx.output_meta, tensors)}


def _fill_inputs(ctx: WorkloadContext, buffers: List[torch.Tensor], trial: Trial) -> None:
    it = iter(buffers)
    for name, shape, _ in ctx.input_meta:
        if shape is not None:
            next(it).copy_(trial.inputs[name])


def _inputs_unchanged(ctx: WorkloadContext, buffers: List[torch.Tensor], trial: Trial) -> Optional[str]:
    it = iter(buffers)
    for name, shape, _ in ctx.input_meta:
        if shape is not None and not guards.bitwise_equal(next(it), trial.inputs[name]):
            return name
    return None


class _Watch:
    """What the gate saw across one evaluation's messages: replaced functions (TIMER_TAMPERED /
    GATE_TAMPERED, decided at the end so that the trace still shows the honest latency),
    protected files that changed (FILE_TAMPERED, at once), Triton launches and host ops (CPU
    provenance), the persisting-L2 limit."""

    def __init__(self, run: SolutionRun):
        self.run = run
        self.timer: List[str] = []
        self.other: List[str] = []
        self.files: List[str] = []
        self.min_launches: Optional[int] = None
        self.host_ops: Dict[str, List[float]] = {}
        self.l2_limit = 0

    def note(self, reply: Dict[str, Any]) -> None:
        timer, other = integrity.split(list(reply.get("tampered") or []))
        self.timer = list(dict.fromkeys(self.timer + timer))
        self.other = list(dict.fromkeys(self.other + other))
        self.files = list(dict.fromkeys(self.files + list(reply.get("files_changed") or [])))
        launched = reply.get("launches")
        if launched is not None:
            self.min_launches = launched if self.min_launches is None else min(self.min_launches, launched)
        for name, v in (reply.get("host_ops") or {}).items():
            agg = self.host_ops.setdefault(name, [0, 0.0, 0])
            for i in range(3):
                agg[i] += v[i]
        self.l2_limit = max(self.l2_limit, int(reply.get("l2_limit") or 0))

    def request(self, msg: Dict[str, Any], timeout_s: float, on_step=None) -> Dict[str, Any]:
        reply = self.run.session.request(msg, timeout_s, on_step=on_step)
        self.note(reply)
        return reply

    @property
    def tampered(self) -> bool:
        return bool(self.timer or self.other)

    def finish(self, trace: Trace, measured: Optional[Performance] = None) -> Trace:
        """Turn a trace into a TIMER_TAMPERED / GATE_TAMPERED rejection when functions were
        replaced (the reason goes first; the measured latency, if any, into the notes)."""
        if not self.tampered:
            return trace
        ev = trace.evaluation
        gate = ev.gate or GateReport()
        codes = ([guards.TIMER_TAMPERED] if self.timer else []) + ([guards.GATE_TAMPERED] if self.other else [])
        gate.reasons = codes + [r for r in gate.reasons if r not in codes]
        gate.notes = dict(gate.notes)
        gate.notes["tampered"] = (self.timer + self.other)[:40]
        perf = measured or ev.performance
        if perf is not None:
            gate.notes["measured_latency_ms"] = perf.latency_ms
            gate.notes["measured_latency_samples_ms"] = perf.latency_samples_ms
        message = f"replaced in the worker: {(self.timer + self.other)[:12]}\n"
        gate.detail = clip(message, DETAIL_WIDTH)
        head, sep, rest = ev.log.partition("\n")
        log = head + sep + message + rest if head.startswith(record.LOG_PREFIX) else message + ev.log
        if ev.status == EvaluationStatus.PASSED:
            ev = Evaluation(status=EvaluationStatus.RUNTIME_ERROR, environment=ev.environment, timestamp=ev.timestamp,
                            log=log, gate=gate)
        else:
            ev = ev.model_copy(update={"gate": gate, "log": log})
        return trace.model_copy(update={"evaluation": ev})


def _time_message(ctx: "WorkloadContext", iterations: int, graph_iterations: int = 0, cupti_iters: int = 0,
                  profile_kernels: bool = False) -> Dict[str, Any]:
    """The ``time`` op: how many iterations (their specs follow one by one, _TimingConversation)
    and which extra clocks to run after them."""
    return {"op": "time", "definition": ctx.builtin.locator, "workload": ctx.workload.model_dump_json(),
            "iterations": iterations, "warmup": ctx.cfg.warmup, "graph_iterations": graph_iterations,
            "cupti_iters": cupti_iters, "profile_kernels": profile_kernels}


class _TimingConversation:
    """The parent's side of one ``time`` op: answers the worker's ``spec`` requests one
    iteration at a time, and at each ``done`` decides, with the parent's own randomness
    (``os.urandom``), whether to copy that iteration's outputs out of the shared buffers for a
    check.  The worker waits for the answer, so nothing in it runs while the copy is made, and
    no call ever sees the inputs of a later iteration.  Out-of-order messages (a forged ``done``,
    a skipped iteration) are recorded in ``violations``."""

    def __init__(self, ctx: "WorkloadContext", t: int, sets, specs: List[Any], with_graph: bool,
                 sample: bool = True, plan: Optional[TimingPlan] = None):
        plan = plan if plan is not None else ctx       # a TimingPlan (tests pass a context-like stand-in)
        self.ctx, self.t, self.sets, self.specs = ctx, t, sets, specs
        self.nsets = len(sets)
        self.forced = dict(plan.sample_plan[t]) if sample else {}   # the twin: always checked
        self.eligible = [i for i in range(ctx.cfg.warmup, len(specs)) if i not in self.forced]
        self.remaining, self.wanted = len(self.eligible), plan.random_samples[t] if sample else 0
        self.graph_plan = set(plan.graph_plan) if with_graph else set()
        self.graph_seeds = list(plan.graph_seeds)
        self.snapshots: Dict[int, List[torch.Tensor]] = {}        # timed iteration -> outputs
        self.graph_snapshots: Dict[int, List[torch.Tensor]] = {}  # graph replay -> outputs
        self.served = -1                                          # last timed spec handed out
        self.done = -1                                            # last timed iteration finished
        self.violations: List[str] = []
        # the parent's own records: each buffer set's last spec (timed iteration i fills set
        # i % nsets, the graph, CUPTI and profile phases set 0), and each iteration's timing
        # sample as it was reported at its "done" (the worker's final lists are only compared)
        self.last_spec_by_set: Dict[int, Any] = {}
        self.samples: Dict[int, Dict[str, Any]] = {}
        self.graph_samples: Dict[int, float] = {}
        self.empty: Dict[str, List[float]] = {}

    def _copy(self, outputs) -> List[torch.Tensor]:
        copies = [o.clone() for o in outputs]
        T.sync(self.ctx.device)
        return copies

    def __call__(self, message: Dict[str, Any]) -> Dict[str, Any]:
        step, phase, i = message.get("step"), message.get("phase"), message.get("i")
        answer: Dict[str, Any] = {"step": step}
        if not isinstance(i, int) or i < 0:
            self.violations.append(f"bad iteration index {i!r}")
            return answer
        if step == "spec":
            if phase == "time":
                if i != self.done + 1 or i >= len(self.specs):
                    self.violations.append(f"spec of timed iteration {i} asked after iteration {self.done} finished")
                    return answer
                self.served = i
                answer["spec"] = self.specs[i]
                self.last_spec_by_set[i % self.nsets] = answer["spec"]
            elif phase == "graph" and i < len(self.graph_seeds):
                answer["spec"] = self.graph_seeds[i]
                self.last_spec_by_set[0] = answer["spec"]
            elif phase in ("cupti", "profile"):
                # the inputs of timed iteration warmup + i: on the GPU the traced call and the timed
                # call of the same inputs are compared one to one (PHASE_MISMATCH)
                answer["spec"] = self.specs[(self.ctx.cfg.warmup + i) % len(self.specs)]
                self.last_spec_by_set[0] = answer["spec"]
            else:
                self.violations.append(f"spec of {phase!r} iteration {i}")
        elif step == "done":
            if phase == "time":
                if i != self.served or i != self.done + 1:
                    self.violations.append(f"timed iteration {i} reported done out of order")
                    return answer
                self.done = i
                sample = message.get("sample")
                if isinstance(sample, dict):
                    self.samples[i] = sample
                take = i in self.forced
                if not take and i >= self.ctx.cfg.warmup and self.remaining > 0:
                    draw = int.from_bytes(os.urandom(4), "little")
                    take = draw * self.remaining < self.wanted * (1 << 32)    # selection sampling
                    self.wanted -= int(take)
                    self.remaining -= 1
                if take:
                    self.snapshots[i] = self._copy(self.sets[i % self.nsets]["outputs"])
            elif phase == "graph":
                sample = message.get("sample")
                if isinstance(sample, dict) and isinstance(sample.get("ms"), (int, float)):
                    self.graph_samples[i] = float(sample["ms"])
                if i in self.graph_plan and i not in self.graph_snapshots:
                    self.graph_snapshots[i] = self._copy(self.sets[0]["outputs"])
            else:
                self.violations.append(f"done of {phase!r} iteration {i}")
        elif step == "sample" and phase == "empty" and not self.empty:
            self.empty = {k: [float(x) for x in (message.get(k) or [])] for k in ("empty_wall_ms", "empty_held_wall_ms")}
        else:
            self.violations.append(f"unknown step {step!r}")
        return answer

    def headline_samples(self, reported: Dict[str, Any], warmup: int) -> Tuple[Dict[str, Any], List[str]]:
        """The trial's timing samples built from the parent's own per-iteration records (the
        device-time policy replayed here: ``timing.HoldPolicy``), over the worker's reply for
        the fields no iteration reports (the CUPTI window, provenance); and what differs between
        the two (a solution that edited the worker's lists: GATE_TAMPERED)."""
        s = dict(reported)
        kinds = {v.get("kind") for v in self.samples.values()}
        own: Dict[str, Any] = {"latency_ms": [], "latency_iters": [], "eager_latency_ms": [], "eager_iters": [],
                               "wall_ms": [], "held_wall_ms": [], "held_span_ms": [], "host_ms": []}
        policy = T.HoldPolicy(True, warmup)
        launches = [v.get("launches") for v in self.samples.values() if v.get("launches") is not None]
        for i in sorted(self.samples):
            v = self.samples[i]
            ms = float(v.get("ms") or 0.0)
            if v.get("kind") == "cpu":
                if i >= warmup:
                    own["latency_ms"].append(ms)
                    own["latency_iters"].append(i)
                    own["wall_ms"].append(ms)
            elif v.get("kind") == "held":
                if not policy.holds(i):
                    self.violations.append(f"timed iteration {i} was held where the device-time policy idles")
                if policy.note(i, v.get("outcome")) and i >= warmup:
                    own["latency_ms"].append(ms)
                    own["latency_iters"].append(i)
                    for k in ("held_wall_ms", "held_span_ms", "host_ms"):
                        own[k].append(float(v.get(k) or 0.0))
            elif v.get("kind") == "eager" and i >= warmup:
                own["eager_latency_ms"].append(ms)
                own["eager_iters"].append(i)
                own["wall_ms"].append(float(v.get("wall_ms") or 0.0))
        if kinds == {"cpu"}:
            own["clock"] = "cpu"
        elif own["latency_ms"]:
            own["clock"] = "device"
        else:
            own["clock"] = "eager"
            own["latency_ms"], own["latency_iters"] = list(own["eager_latency_ms"]), list(own["eager_iters"])
        own["hold_timeouts"] = policy.timeouts if "held" in kinds else int(reported.get("hold_timeouts") or 0)
        own["min_launches"] = min(launches) if launches else None
        own["graph_latency_ms"] = [self.graph_samples[i] for i in sorted(self.graph_samples)]
        own.update(self.empty)
        differ = [k for k, v in own.items() if k in reported and not _same_samples(reported.get(k), v)]
        s.update(own)
        return s, differ


def _same_samples(a: Any, b: Any) -> bool:
    """Two sample lists (or scalars) equal to the float precision they travelled with."""
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same_samples(x, y) for x, y in zip(a, b))
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(float(a) - float(b)) <= 1e-9 * max(1.0, abs(float(b)))
    return a == b


def evaluate(run: SolutionRun, ctx: WorkloadContext) -> Trace:
    """Judge one solution on one workload.  Never raises for anything the solution does."""
    watch = _Watch(run)
    problem = ctx.problem()
    if problem is not None:
        return _workload_failed(ctx, run, problem)
    try:
        trace, measured = _evaluate(run, ctx, watch)
    except WorkloadProblem as exc:   # the parent's own preparation failed mid-way (a sampled iteration)
        run.session.kill()           # out of step with the worker: the next workload starts a fresh one
        return _workload_failed(ctx, run, exc)
    return watch.finish(trace, measured)


def _evaluate(run: SolutionRun, ctx: WorkloadContext, watch: _Watch):
    from kernelwright.gate.worker import poison

    cfg = ctx.cfg
    session = run.session
    if run.compile_failed is not None:
        return _failed(ctx, run, run.compile_failed), None
    if not session.alive:
        reply = session.start() if session.proc is None else session.restart()
        if not reply.get("ok"):
            if reply.get("status") == "COMPILE_ERROR":
                run.compile_failed = reply
            return _failed(ctx, run, reply), None
    watch.note(session.load_reply)
    session.new_log()
    gate = GateReport(trials=cfg.trials)
    load = session.load_reply
    if watch.files:
        return _rejected(ctx, run, guards.FILE_TAMPERED, f"protected files changed while loading: {watch.files[:8]}", gate), None
    gaps = list(load.get("integrity_gaps") or [])
    own_gaps = integrity.gap_concerns(gaps, ctx.builtin.base_name)
    if own_gaps:
        return _rejected(ctx, run, guards.INTEGRITY_INCOMPLETE,
                         f"the worker's integrity snapshot misses this definition: {own_gaps[:3]}", gate), None
    gate.warnings += [f"{guards.INTEGRITY_INCOMPLETE}: not snapshotted in the worker: {g}" for g in gaps]
    if cfg.guards and load.get("py_threads", 0) > load.get("py_threads_before", 1 << 30):
        return _rejected(ctx, run, guards.BACKGROUND_THREAD,
                         f"importing the solution started {load['py_threads'] - load['py_threads_before']} Python "
                         "thread(s): work can run outside the measured call", gate), None
    nsets = ctx.nsets
    reply = watch.request({"op": "alloc", "sets": nsets, "samples": 0,
                           "inputs": ctx.input_meta, "outputs": ctx.output_meta}, session.timeouts.alloc_s)
    if not reply.get("ok"):
        return _failed(ctx, run, reply, gate), None
    sets = reply["sets"]
    load_threads = load.get("threads", -1)
    load_children = load.get("children", 0)

    def files_changed() -> Optional[Trace]:
        if watch.files:
            return _rejected(ctx, run, guards.FILE_TAMPERED,
                             f"protected files changed during a call of the solution: {watch.files[:8]}", gate)
        return None

    # 1. correctness on fresh inputs per trial
    worst = CheckResult(EvaluationStatus.PASSED)
    checks: List[CheckResult] = []
    first_call_threads = None
    for t, trial in enumerate(ctx.trials):
        _fill_inputs(ctx, sets[0]["inputs"], trial)
        poison(sets[0]["outputs"], 0)
        T.sync(ctx.device)
        reply = watch.request({"op": "call", "set": 0, "scalars": ctx.scalars(trial)}, session.timeouts.call_s)
        bad = files_changed()
        if bad:
            return bad, None
        if not reply.get("ok"):
            return _failed(ctx, run, reply, gate), None
        if first_call_threads is None:
            first_call_threads = reply.get("threads", -1)
        # native threads: those the solution's calls started and that are still alive, beyond two
        # (a library's lazily started helpers, e.g. cuda-EvtHandlr), and every thread alive since
        # the import beyond eight: the worker itself starts a few between calls (an honest MoE
        # solution was once rejected for three), and a thread a call started can start more after
        # the call returns (red-team case native_thread_trampoline)
        call_threads = reply.get("call_threads") or []
        since_load = reply.get("threads", -1) - load_threads if load_threads >= 0 else 0
        if cfg.guards and (reply.get("py_threads", 0) > load.get("py_threads", 1 << 30)
                           or len(call_threads) > 2 or since_load > 8):
            return _rejected(ctx, run, guards.BACKGROUND_THREAD,
                             f"threads still running after the call: {reply.get('threads')} native "
                             f"(at load {load_threads}), {reply.get('py_threads')} Python; started by the "
                             f"solution's calls: {call_threads}; "
                             f"since the import: {reply.get('new_threads') or '?'}", gate), None
        changed = _inputs_unchanged(ctx, sets[0]["inputs"], trial)
        if changed:
            return _rejected(ctx, run, guards.INPUT_MUTATED, f"input {changed!r} was modified by the call", gate), None
        if cfg.guards and reply.get("children", 0) > load_children:
            return _rejected(ctx, run, guards.CHILD_PROCESS, "child processes left running after the call", gate), None
        check = check_outputs(ctx.builtin.checker, _outputs_of(ctx, sets[0]["outputs"]), trial.expected,
                              ctx.builtin.tolerance, trial.inputs)
        if not check.passed:
            return _rejected(ctx, run, check.reason or guards.TOLERANCE, f"trial {t}: {check.detail}", gate, check), None
        checks.append(check)
        worst.max_absolute_error = max(worst.max_absolute_error, check.max_absolute_error)
        worst.max_relative_error = max(worst.max_relative_error, check.max_relative_error)
        worst.matched_ratio = min(worst.matched_ratio, check.matched_ratio)
        if cfg.guards and t == 0:
            # determinism / uninitialised memory: same inputs, another buffer set, other poison,
            # a churned allocator
            _fill_inputs(ctx, sets[1]["inputs"], trial)
            poison(sets[1]["outputs"], 1)
            T.sync(ctx.device)
            reply = watch.request({"op": "call", "set": 1, "scalars": ctx.scalars(trial), "churn": True},
                                  session.timeouts.call_s)
            bad = files_changed()
            if bad:
                return bad, None
            if not reply.get("ok"):
                return _failed(ctx, run, reply, gate), None
            changed = _inputs_unchanged(ctx, sets[1]["inputs"], trial)
            if changed:
                return _rejected(ctx, run, guards.INPUT_MUTATED, f"input {changed!r} was modified by the call", gate), None
            again = check_outputs(ctx.builtin.checker, _outputs_of(ctx, sets[1]["outputs"]), trial.expected,
                                  ctx.builtin.tolerance, trial.inputs)
            if not again.passed:
                return _rejected(ctx, run, guards.NONDETERMINISTIC,
                                 f"a second run on the same inputs failed: {again.detail}", gate, again), None
    # the record: contest statistics and strict errors, each the worst over the trials
    worst.rule, worst.strict = ctx.builtin.tolerance.rule, worst_strict(checks)
    correctness = Correctness(max_absolute_error=_nn(worst.max_absolute_error),
                              max_relative_error=_nn(worst.max_relative_error),
                              extra=worst.verdict_record(ctx.builtin.tolerance))

    # 2. timing (fresh input contents every iteration, a twin, rotating buffers, sampled checks)
    clocks = ClockTrials()
    graph_lat, ksum, kspan = [], [], []
    kernels: Dict[str, List[float]] = {}
    durations: Dict[str, List[float]] = {}      # CUPTI: each record's us per kernel name
    launched: Optional[Dict[str, int]] = None   # CUDA: Triton kernels the solution launched (CUPTI window)
    launches: Dict[str, List[float]] = {}
    plan = ctx.plan_for(candidate_key(run))     # this candidate's own timed inputs
    notes: Dict[str, Any] = {"input_nonce": cfg.nonce, "input_candidate": plan.candidate}
    fixed_note = ctx.fresh_note()
    if fixed_note:
        notes["fixed_inputs"] = fixed_note
        if plan.twins and all(t is None for t in plan.twins) and cfg.guards:
            gate.warnings.append(f"FIXED_INPUTS: {fixed_note}")
    phase_pairs: Tuple[List[float], ...] = ()
    for t in range(cfg.trials):
        specs = plan.timing_specs[t] if cfg.guards else [plan.timing_seeds[t][0]] * len(plan.timing_seeds[t])
        with_graph = t == 0 and bool(cfg.graph_iterations)
        msg = _time_message(ctx, len(specs), graph_iterations=len(plan.graph_seeds) if with_graph else 0,
                            cupti_iters=cfg.cupti_iterations if t == 0 else 0, profile_kernels=t == 0)
        talk = _TimingConversation(ctx, t, sets, specs, with_graph, plan=plan)
        reply = watch.request(msg, session.timeouts.timing_op_s(msg["iterations"] + msg["graph_iterations"]
                                                                + msg["cupti_iters"] + 1), on_step=talk)
        bad = files_changed()
        if bad:
            return bad, None
        if not reply.get("ok"):
            return _failed(ctx, run, reply, gate), None
        if cfg.guards:
            # the next reply must answer the next message: a forged early reply leaves the real
            # one queued, and it would arrive here instead of the pong
            nonce = int.from_bytes(os.urandom(8), "little")
            pong = watch.request({"op": "ping", "nonce": nonce}, session.timeouts.call_s)
            if pong.get("pong") != nonce:
                session.kill()   # out of step: the next workload starts a fresh worker
                return _rejected(ctx, run, guards.GATE_TAMPERED,
                                 "the worker's replies are out of step with the parent's messages", gate), None
        s, edited = talk.headline_samples(reply["samples"], cfg.warmup)
        if edited and cfg.guards:
            watch.other = list(dict.fromkeys(watch.other + [f"timing samples edited in the worker: {edited[:6]}"]))
        if talk.violations or talk.done != len(specs) - 1:
            session.kill()
            return _rejected(ctx, run, guards.GATE_TAMPERED,
                             "the worker's timing exchange is out of step with the parent's: "
                             f"{(talk.violations or [f'{talk.done + 1} of {len(specs)} iterations reported'])[:3]}",
                             gate), None
        for it in sorted(talk.snapshots):
            ref = ctx.sample_trial(specs[it])
            check = check_outputs(ctx.builtin.checker, _outputs_of(ctx, talk.snapshots[it]), ref.expected,
                                  ctx.builtin.tolerance, ref.inputs)
            if not check.passed:
                twin = " (a twin of an earlier iteration: an output cache keyed on pointers/input values?)" \
                    if it == plan.twins[t] else ""
                return _rejected(ctx, run, guards.STALE_OUTPUT,
                                 f"timed iteration {it} of trial {t} returned a wrong output for its inputs{twin} "
                                 f"({check.detail})", gate, check), None
        if cfg.guards:
            for set_index, spec in talk.last_spec_by_set.items():   # the parent's own record
                expected = ctx.inputs_of(spec)
                it = iter(sets[set_index]["inputs"])
                for name, shape, _ in ctx.input_meta:
                    if shape is not None and not guards.bitwise_equal(next(it), expected[name]):
                        return _rejected(ctx, run, guards.INPUT_MUTATED,
                                         f"input {name!r} was modified during the timed iterations", gate), None
            if reply.get("py_threads", 0) > load.get("py_threads", 1 << 30) or (
                    reply["threads_after"] > reply["threads_before"] >= 0) or (
                    load_threads >= 0 and reply["threads_after"] - load_threads > 8):
                return _rejected(ctx, run, guards.BACKGROUND_THREAD,
                                 f"threads: at load {load_threads}, after the first call {first_call_threads}, "
                                 f"timed loop {reply['threads_before']} -> {reply['threads_after']}", gate), None
            if reply["children_after"] > load_children:
                return _rejected(ctx, run, guards.CHILD_PROCESS, "child processes left running", gate), None
        lat = s.get("latency_ms") or []
        if t == 0 and s.get("kernel_span_ms"):
            # timed latencies with the traced kernel sum and span of the same inputs (PHASE_MISMATCH)
            phase_pairs = headline_phase_pairs(s, cfg.warmup)
        impossible = clocks.add(s)
        if impossible:
            return _rejected(ctx, run, guards.TIMER_INCONSISTENT, impossible, gate), None
        parent_wall = reply.get("parent_wall_s", math.inf)
        if sum(lat) / 1e3 > parent_wall * 1.01:
            return _rejected(ctx, run, guards.TIMER_INCONSISTENT,
                             "reported latencies exceed the parent's wall clock for the timing phase", gate), None
        op_wall = reply.get("op_wall_s")
        if cfg.guards and op_wall is not None and math.isfinite(parent_wall) and op_wall < 0.5 * parent_wall - 0.25:
            return _rejected(ctx, run, guards.TIMER_INCONSISTENT,
                             f"the worker's clock saw {op_wall:.3f} s for a timing phase the parent saw take "
                             f"{parent_wall:.3f} s", gate), None
        if s.get("min_launches") is not None:
            watch.note({"launches": s["min_launches"]})
        for name, v in (s.get("host_ops") or {}).items():
            watch.note({"host_ops": {name: v}})
        for name, (count, total) in (s.get("launches") or {}).items():
            agg = launches.setdefault(name, [0, 0.0])
            agg[0] += count
            agg[1] += total
        if s.get("graph_latency_ms"):
            graph_ok = True
            for it in plan.graph_plan:
                if it not in talk.graph_snapshots:
                    graph_ok = False
                    notes["graph"] = f"graph replay {it} was never reported done; graph latency not reported"
                    continue
                ref = ctx.sample_trial(plan.graph_seeds[it])
                check = check_outputs(ctx.builtin.checker, _outputs_of(ctx, talk.graph_snapshots[it]), ref.expected,
                                      ctx.builtin.tolerance, ref.inputs)
                if not check.passed:
                    graph_ok = False
                    notes["graph"] = f"graph replay gave wrong outputs ({check.detail}); graph latency not reported"
            if graph_ok:
                graph_lat.append(statistics.median(s["graph_latency_ms"]))
        elif s.get("graph_error"):
            notes["graph"] = s["graph_error"]
        if s.get("kernel_sum_ms"):
            ksum.append(statistics.median(s["kernel_sum_ms"]))
            kspan.append(statistics.median(s["kernel_span_ms"]))
        if s.get("cupti_error"):
            notes["cupti"] = s["cupti_error"]
        for name, (count, total) in s.get("kernels", {}).items():
            agg = kernels.setdefault(name, [0, 0.0])
            agg[0] += count
            agg[1] += total
        for name, values in (s.get("kernel_durations") or {}).items():
            durations.setdefault(name, []).extend(float(x) for x in values)
        if s.get("launched") is not None:
            launched = dict(launched or {})
            for name, n in s["launched"].items():
                launched[name] = launched.get(name, 0) + int(n)

    headline = clocks.decide(trusted=session.trusted)
    latency = headline.latency_ms
    notes["clock"] = {"headline": headline.clock, **headline.notes}
    ref_ms = ctx.reference_latency_ms()
    graph_ms = float(statistics.mean(graph_lat)) if graph_lat else None
    perf = Performance(latency_ms=latency, reference_latency_ms=ref_ms, speedup_factor=ref_ms / latency,
                       eager_latency_ms=headline.eager_ms, clock=headline.clock, graph_latency_ms=graph_ms,
                       kernel_time_ms=float(statistics.mean(ksum)) if ksum else None,
                       kernel_span_ms=float(statistics.mean(kspan)) if kspan else None,
                       timing_method=T.device_clock_label(headline.clock, clocks.hold_kind),
                       latency_samples_ms=[round(x, 6) for x in headline.per_trial_ms])
    ratio, mismatch = graph_agreement(headline, graph_ms)
    if ratio is not None:
        notes["clock"]["device_vs_graph"] = round(ratio, 3)
    if mismatch and cfg.guards:
        gate.suspicious = True
        gate.reasons.append(guards.DEVICE_GRAPH_MISMATCH)
        notes["suspicious"] = mismatch
    if ctx.device.type == "cuda" and cfg.guards:
        unmeasured = clocks.unmeasured_work(headline)
        if unmeasured:
            return _rejected(ctx, run, guards.UNMEASURED_WORK, unmeasured, gate), perf
        span_ref = cupti_span_reference(clocks, headline)   # like with like: held or eager traced calls
        if kspan and kspan[0] > 3.0 * span_ref + 0.1:
            return _rejected(ctx, run, guards.UNMEASURED_WORK,
                             f"CUPTI span {kspan[0]:.3f} ms over all streams vs events {span_ref:.3f} ms",
                             gate), perf

    # provenance is observed in recognisable calls (the CUPTI window, the profiled call): a solution
    # that runs other, faster code in its timed calls shows timed calls faster than the kernels it ran
    # there on the same inputs (each pair: trial 0, timed iteration warmup + i, traced on the same
    # spec, so the workload's own variance, e.g. MoE routing, cancels).  GPU only: on CPU the
    # interpreter's per-launch cost swamps the compute (docs/gate.md, section 3, item 6).
    if cfg.guards and phase_pairs:
        reason, message = guards.phase_verdict(*phase_pairs)
        if reason is not None:
            return _rejected(ctx, run, reason, message, gate), perf
    if cfg.guards and ctx.device.type == "cuda" and ksum and kspan:
        reason, message = guards.trial_phase_verdict(headline.per_trial_ms, ksum[0], kspan[0])
        if reason is not None:
            return _rejected(ctx, run, reason, message, gate), perf

    # provenance by launch (issue 22 item 4): the Triton kernels the worker saw the solution
    # launch in the CUPTI window, the __global__ names of its CUDA sources, vendor patterns first
    declared = guards.own_kernel_names({src.path: src.content for src in session.solution.sources
                                        if not src.path.endswith(".py")})
    split = guards.attribute_kernels(kernels, launched, durations, declared) if ctx.device.type == "cuda" else {}
    own = guards.own_kernel_names({src.path: src.content for src in session.solution.sources})
    gate.kernels = [KernelRecord(name=n, count=int(v[0]), total_us=float(v[1]),
                                 origin=guards.kernel_origin(n, split) if split else guards.classify_kernel(n, own))
                    for n, v in sorted(kernels.items(), key=lambda kv: -kv[1][1])[:30]]
    if cfg.guards and run.requires_kernel and ctx.builtin.requires_kernel:
        if load.get("counts_launches"):
            out_elements = sum(math.prod(shape) for _, shape, _ in ctx.output_meta)
            reason, message = guards.cpu_provenance_verdict(launches, watch.host_ops, out_elements,
                                                            watch.min_launches if watch.min_launches is not None else 0)
            if reason is not None:
                return _rejected(ctx, run, reason, message, gate), perf
        else:
            cuda = ctx.device.type == "cuda"
            reason, message = guards.provenance_verdict(kernels, cpu_ops=not cuda, own_names=declared if cuda else own,
                                                        launched=launched if cuda else None, durations=durations)
            if reason is not None and (kernels or cuda):
                return _rejected(ctx, run, reason, message, gate), perf

    # provenance ablation (CPU): skip every Triton launch; if the outputs still come out right, the
    # work ran elsewhere (torch under DisableTorchFunction, numpy: case ``hidden_host_compute``).  Not
    # judged where a constant fill could produce the reference (all its elements equal).
    if cfg.guards and ctx.device.type == "cpu" and run.requires_kernel and ctx.builtin.requires_kernel \
            and load.get("counts_launches") and not _constant_reference(ctx.trials[0].expected):
        trial = ctx.trials[0]
        _fill_inputs(ctx, sets[0]["inputs"], trial)
        poison(sets[0]["outputs"], 1)
        reply = watch.request({"op": "call", "set": 0, "scalars": ctx.scalars(trial), "ablate": True},
                              session.timeouts.call_s)
        bad = files_changed()
        if bad:
            return bad, perf
        if reply.get("ok") and check_outputs(ctx.builtin.checker, _outputs_of(ctx, sets[0]["outputs"]),
                                             trial.expected, ctx.builtin.tolerance, trial.inputs).passed:
            return _rejected(ctx, run, guards.HOST_COMPUTE,
                             "with every Triton launch skipped, the call still produced the right outputs: "
                             "the work ran outside the solution's kernels", gate), perf
        # a crash or an exception here decides nothing: an honest solution may fail without its kernels
    ceilings = ceilings_for_run(ctx.device) if ctx.builtin.roofline is not None else None
    if ceilings is not None:
        work = ctx.roofline()
        floor_ms = work.floor_s(ceilings["measured"]) * 1e3
        gate.roofline_floor_ms = floor_ms
        gate.roofline_fraction = floor_ms / latency
        notes["roofline"] = {"flops": work.flops, "bytes": work.bytes, "unit": work.unit,
                             "launch_latency_us": ceilings["measured"].get("launch_latency_s", 0.0) * 1e6,
                             "achieved_TBps": work.bytes / (latency * 1e-3) / 1e12,
                             "achieved_TFLOPs": work.flops / (latency * 1e-3) / 1e12}
        if latency < work.floor_s(ceilings["peak"]) * 1e3 * 0.98:
            gate.suspicious = True
            gate.reasons.append(guards.BELOW_ROOFLINE)
            notes["suspicious"] = (f"{latency * 1e3:.1f} us is below the physical floor "
                                   f"{work.floor_s(ceilings['peak']) * 1e6:.1f} us at the device's peak")
    if watch.l2_limit > 0:
        gate.suspicious = True
        gate.reasons.append(guards.L2_PERSISTENCE)
        notes["l2_persistence"] = (f"the solution set a persisting-L2 limit of {watch.l2_limit} bytes; the gate "
                                   "resets persisting lines and the limit before every timed iteration")
    gate.notes = notes
    return _trace(ctx, run, EvaluationStatus.PASSED, log=session.new_log(), correctness=correctness,
                  performance=perf, gate=gate), perf


def time_only(run: SolutionRun, ctx: WorkloadContext) -> Optional[float]:
    """Latency (ms, same clock and protocol, no correctness claim) of a lower-bound entry such as
    'the vendor's two grouped GEMMs alone'; None if it fails to run."""
    session = run.session
    if not session.alive:
        reply = session.start() if session.proc is None else session.restart()
        if not reply.get("ok"):
            return None
    reply = session.request({"op": "alloc", "sets": 2, "samples": 0, "inputs": ctx.input_meta,
                             "outputs": ctx.output_meta}, session.timeouts.alloc_s)
    if not reply.get("ok"):
        return None
    sets = reply["sets"]
    medians = []
    for t in range(ctx.cfg.trials):
        plan = ctx.plan_for(candidate_key(run))
        specs = plan.timing_seeds[t]
        talk = _TimingConversation(ctx, t, sets, specs, with_graph=False, sample=False, plan=plan)
        reply = session.request(_time_message(ctx, len(specs)), session.timeouts.timing_op_s(len(specs)), on_step=talk)
        if not reply.get("ok") or talk.violations or talk.done != len(specs) - 1:
            return None
        samples, _ = talk.headline_samples(reply["samples"], ctx.cfg.warmup)
        medians.append(statistics.median(samples["latency_ms"]))
    return float(statistics.mean(medians))
