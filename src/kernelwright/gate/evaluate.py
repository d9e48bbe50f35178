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
from kernelwright.gate import timing
from kernelwright.gate.checkers import CheckResult, RowExemption, check_outputs, row_exemption, worst_strict
from kernelwright.gate.device_info import ceilings_for_run, resolve_device
from kernelwright.gate.environment import environment
from kernelwright.gate.headline import ClockTrials, cupti_span_reference, graph_agreement, graph_disagreement
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
    # CUPTI traces every held timed call (kernels, copies, memsets): the checks that read CUPTI
    # (provenance, PHASE_MISMATCH, the refusals of device time) see the very calls the headline
    # times, so no call can behave one way when traced and another when timed
    cupti_tracing: bool = True
    guards: bool = True           # False: --fast-unsafe (no fresh inputs per iteration, samples, determinism)
    split: str = "public"
    salt: str = "kernelwright-public"
    # drawn per run (os.urandom) and mixed into every input seed, so no solution can compute the
    # inputs of its timed iterations in advance (red-team case ``predict_inputs``); a run with the
    # same nonce reproduces the inputs.  Each trace records only its SHA-256 (``input_nonce_sha256``):
    # the traces are written while later workloads run, and a worker that read the nonce there
    # could predict every later input; the nonce itself is in summary.json (``meta.config``),
    # written after every worker has exited
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
        5 timed, 5 graph, 2 reference iterations); every override that is not None wins."""
        cfg = cls(device=device)
        if quick:
            cfg.warmup, cfg.iterations, cfg.graph_iterations = 2, 5, 5
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
    """One set of inputs and the parent's reference outputs of them.  ``exemption``: the rows a
    near-tie decides and their alternative references (``checkers.row_exemption``), computed
    while the full inputs exist; a sampled iteration's trial keeps only that and its references
    (its inputs are dropped: at full size they are GBs)."""

    inputs: Dict[str, Any]
    expected: Dict[str, torch.Tensor]
    exemption: Optional[RowExemption] = None


@dataclass
class TimingPlan:
    """One candidate's timed iterations on one workload: per trial the seeds, the input specs
    (with one twin of an earlier iteration, gate/fresh.py), the forced checks (the twin) and how
    many more the parent draws after each call; the graph replays' seeds and which replay is
    checked.  Every seed mixes the run's nonce with ``candidate``."""

    candidate: str
    timing_seeds: List[List[Any]]
    timing_specs: List[List[Any]]
    twins: List[Optional[int]]
    sample_plan: List[Dict[int, int]]
    random_samples: List[int]
    graph_seeds: List[Any]
    graph_plan: Dict[int, int]

    @classmethod
    def draw(cls, ctx: "WorkloadContext", candidate: str) -> "TimingPlan":
        cfg = ctx.cfg
        run = (cfg.salt, cfg.split, ctx.workload.uuid, cfg.nonce)
        base = run + ((candidate,) if candidate else ())
        n = cfg.warmup + cfg.iterations
        seeds_all = [[seed_for(*base, "iter", t, i) for i in range(n)] for t in range(cfg.trials)]
        if ctx.shares_cost_inputs:
            seeds_all = [[fresh.shared_spec(seed, seed_for(*run, "shared", t, i)) for i, seed in enumerate(seeds)]
                         for t, seeds in enumerate(seeds_all)]
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
        graph_seeds = paired_graph_seeds(specs_all[0] if specs_all else [], cfg.warmup, cfg.graph_iterations,
                                         [seed_for(*base, "graph", i) for i in range(cfg.graph_iterations)])
        graph_plan = {it: max(k, 1) + j for j, it in enumerate(sorted(rng.sample(range(len(graph_seeds)),
                                                                      min(1 if cfg.guards else 0, len(graph_seeds)))))}
        return cls(candidate, seeds_all, specs_all, twins, plan, random_samples, graph_seeds, graph_plan)


def paired_graph_seeds(specs: List[Any], warmup: int, count: int, fresh_seeds: List[int]) -> List[Any]:
    """The graph replays' inputs: the specs of trial 0's held timed iterations (the first half past
    the warm-up, ``timing.HoldPolicy``; a twin iteration is skipped), so that
    DEVICE_GRAPH_MISMATCH compares the two clocks on the same draws, then ``fresh_seeds``.
    Unpaired, a routing-dependent call (MoE at T <= 16: the latency follows how many local
    experts the draw hits) read 29 us by device time against 69 us by graph replay on the H200
    (results/h200/2026-12-02-records).  Every input was already consumed by its timed call."""
    held = [specs[i] if not isinstance(specs[i], int) else int(specs[i])
            for i in held_timed_iterations(warmup, len(specs)) if not fresh.is_twin(specs[i])]
    return (held + list(fresh_seeds))[:count]


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
        self._flusher: Optional[timing.L2Flusher] = None
        self.nsets = max(2, cfg.buffer_sets)
        self._plans: Dict[str, "TimingPlan"] = {}

    @property
    def shares_cost_inputs(self) -> bool:
        """Whether timed iterations draw the definition's ``shared_inputs`` from seeds all
        candidates share (none of them fixed by the workload, which would keep them the same
        anyway)."""
        names = self.builtin.shared_inputs
        return bool(names) and self.builtin.make_shared_inputs is not None and not set(names) & set(self.fixed)

    def plan_for(self, candidate: str) -> "TimingPlan":
        """The timed inputs of one candidate on this workload (``TimingPlan``): drawn from the
        run's nonce and the candidate's identity, so no two candidates of a run are timed on the
        same inputs and none can replay another's recorded outputs (case ``replay_rival``); only the
        definition's ``shared_inputs`` (what sets the cost) come from the run's seeds
        (``shares_cost_inputs``).  The correctness trials and their references stay shared
        (``trials``)."""
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
        return Trial(inputs, expected, row_exemption(self.builtin.tolerance, inputs))

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
            trial = Trial(inputs, normalize_outputs(self.builtin.reference(**inputs), self.definition.output_names),
                          row_exemption(self.builtin.tolerance, inputs))
            if self.builtin.checker != "topk_indices":  # the indexer checker needs all the inputs
                trial = Trial({}, trial.expected, trial.exemption)
            self._sample_refs[key] = trial
        return self._sample_refs[key]

    def scalars(self, trial: Trial) -> Dict[str, Any]:
        return {n: trial.inputs[n] for n, shape, _ in self.input_meta if shape is None}

    @property
    def flusher(self) -> timing.L2Flusher:
        if self._flusher is None:
            self._flusher = timing.L2Flusher(self.device)
        return self._flusher

    def reference_latency_ms(self) -> float:
        """Median over iterations (cold L2) of the reference on trial 0's inputs."""
        if self._ref_latency is None:
            inputs = self.trials[0].inputs
            times = []
            for i in range(self.cfg.reference_warmup + self.cfg.reference_iterations):
                self.flusher.flush()
                timing.sync(self.device)
                if self.device.type == "cuda":
                    a, b = timing.new_event(), timing.new_event()
                    timing.record(a)
                    self.builtin.reference(**inputs)
                    timing.record(b)
                    timing.sync(self.device)
                    ms = timing.elapsed_ms(a, b)
                else:
                    t0 = timing.now_s()
                    self.builtin.reference(**inputs)
                    ms = (timing.now_s() - t0) * 1e3
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
        self.unlowered: Dict[str, str] = {}     # CPU: kernels whose body a GPU could not run
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
        for name, why in (reply.get("unlowered") or {}).items():
            self.unlowered.setdefault(str(name), str(why))

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
            if perf.eager_latency_ms is not None:
                gate.notes["measured_eager_latency_ms"] = perf.eager_latency_ms
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


def held_timed_iterations(warmup: int, count: int) -> List[int]:
    """The timed iterations past the warm-up that ``timing.HoldPolicy`` holds (the first half) of
    a loop of ``count`` iterations (a hold that never times out): those CUPTI traces, and whose
    inputs the graph replays reuse."""
    policy = timing.HoldPolicy(True, warmup, count)
    return [i for i in range(warmup, count) if policy.holds(i)]


def _time_message(ctx: "WorkloadContext", iterations: int, graph_iterations: int = 0, trace_held: bool = False,
                  profile_kernels: bool = False) -> Dict[str, Any]:
    """The ``time`` op: how many iterations (their specs follow one by one, _TimingConversation),
    whether CUPTI traces the held ones (``trace_held``) and which extra clocks run after them."""
    return {"op": "time", "definition": ctx.builtin.locator, "workload": ctx.workload.model_dump_json(),
            "iterations": iterations, "warmup": ctx.cfg.warmup, "graph_iterations": graph_iterations,
            "trace_held": trace_held, "profile_kernels": profile_kernels}


class _TimingConversation:
    """The parent's side of one ``time`` op: answers the worker's ``spec`` requests one
    iteration at a time, and at each ``done`` decides, with the parent's own randomness
    (``os.urandom``), whether to copy that iteration's outputs out of the shared buffers for a
    check.  The worker waits for the answer, so nothing in it runs while the copy is made, and
    no call ever sees the inputs of a later iteration.  CUPTI's lists of the traced held calls
    arrive as one ``sample`` step of phase ``cupti``, between the last held and the first idle
    iteration (``timing.HeldTracing.end``), and the parent keeps them (``cupti``): the op's reply
    is only compared with them.  Out-of-order messages (a forged ``done``, a skipped iteration, a
    graph or profile spec asked before the loop ended, CUPTI lists sent twice or elsewhere) are
    recorded in ``violations``; CUPTI lists that show the tracer tampered with, in
    ``tracer_problems``."""

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
        self.cupti: Optional[Dict[str, Any]] = None   # the traced calls' CUPTI lists, as sent
        self.cupti_after = -1                           # the last timed iteration done before they came
        self.tracer_problems: List[str] = []

    def _copy(self, outputs) -> List[torch.Tensor]:
        copies = [o.clone() for o in outputs]
        timing.sync(self.ctx.device)
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
            elif phase in ("graph", "profile") and self.done != len(self.specs) - 1:
                # after the loop only: graph seeds are trial 0's held timed iterations
                # (``paired_graph_seeds``) and profile specs timed ones, so either asked early
                # would tell a call the inputs of iterations still to come (case spec_ahead)
                self.violations.append(f"spec of {phase} iteration {i} asked before the timed loop finished")
                return answer
            elif phase == "graph" and i < len(self.graph_seeds):
                answer["spec"] = self.graph_seeds[i]
                self.last_spec_by_set[0] = answer["spec"]
            elif phase == "profile":
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
        elif step == "sample" and phase == "cupti":
            self._take_cupti(message)
        else:
            self.violations.append(f"unknown step {step!r}")
        return answer

    def _take_cupti(self, message: Dict[str, Any]) -> None:
        """Keep the traced calls' CUPTI lists (``timing.TRACED_FIELDS``) as the worker sent them:
        once per op, between two timed iterations (where they came is judged with the
        iterations' kinds, ``_traced_iterations``)."""
        if self.cupti is not None or self.served != self.done:
            self.violations.append("CUPTI lists sent twice" if self.cupti is not None
                                   else f"CUPTI lists sent inside timed iteration {self.served}")
            return
        self.cupti = {k: message.get(k) for k in timing.TRACED_FIELDS}
        self.cupti_after = self.done

    def _traced_iterations(self, warmup: int) -> List[int]:
        """The timed iterations CUPTI traced, by the parent's own records: every held one past the
        warm-up (the worker traces them all, ``Harness.op_time``), in order; none without CUPTI
        lists.  The lists must have come after the last of them and before the first idle
        iteration, with one entry each (else a violation); their content is judged in
        ``_check_tracer``."""
        if self.cupti is None:
            return []
        held = [i for i in sorted(self.samples) if i >= warmup and self.samples[i].get("kind") == "held"]
        idle = [i for i, v in self.samples.items() if v.get("kind") == "eager"]
        if any(i > self.cupti_after for i in held) or any(i <= self.cupti_after for i in idle):
            self.violations.append(f"CUPTI lists sent after timed iteration {self.cupti_after}, not between the held "
                                   "and the idle iterations")
            return []
        calls = len(self.cupti.get("kernel_sum_ms") or [])
        if calls != len(held):
            self.violations.append(f"CUPTI records for {calls} traced calls, {len(held)} held timed iterations")
            return []
        self._check_tracer(held)
        return held

    def _check_tracer(self, held: List[int]) -> None:
        """``tracer_problems``: what the worker's record store reported (a list rebound or edited:
        ``CuptiKernelTracer.take``), a released hold without its record
        (``guards.missing_hold_records``), Triton launches without a record
        (``guards.unrecorded_launches``)."""
        lists = self.cupti or {}
        released = [self.samples[i].get("outcome") == timing.HOLD_RELEASED for i in held]
        self.tracer_problems += [str(x) for x in (lists.get("cupti_tampered") or [])]
        self.tracer_problems += guards.missing_hold_records(released, [bool(x) for x in lists.get("cupti_held") or []])
        self.tracer_problems += guards.unrecorded_launches(lists.get("launched") or {}, lists.get("kernels") or {})

    def headline_samples(self, reported: Dict[str, Any], warmup: int) -> Tuple[Dict[str, Any], List[str]]:
        """The trial's timing samples built from the parent's own records: per iteration (the
        device-time policy replayed here: ``timing.HoldPolicy``) and CUPTI's lists as they were
        sent (``timing.TRACED_FIELDS``; where none came, those of an op that traced nothing),
        over the worker's reply for the rest; and what differs between the two (a solution that
        edited the worker's lists: GATE_TAMPERED)."""
        s = dict(reported)
        kinds = {v.get("kind") for v in self.samples.values()}
        own: Dict[str, Any] = {"latency_ms": [], "latency_iters": [], "eager_latency_ms": [], "eager_iters": [],
                               "wall_ms": [], "held_wall_ms": [], "held_span_ms": [], "host_ms": []}
        policy = timing.HoldPolicy(True, warmup, len(self.specs))
        launches = [v.get("launches") for v in self.samples.values() if v.get("launches") is not None]
        for i in sorted(self.samples):
            v = self.samples[i]
            ms = float(v.get("ms") or 0.0)
            if v.get("kind") == "cpu":
                if i >= warmup:
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
            own["latency_ms"], own["latency_iters"] = timing.cpu_headline(
                [(i, float(v.get("ms") or 0.0), int(v.get("watched") or 0)) for i, v in sorted(self.samples.items())],
                warmup)
        elif own["latency_ms"]:
            own["clock"] = "device"
        else:
            own["clock"] = "eager"
            own["latency_ms"], own["latency_iters"] = list(own["eager_latency_ms"]), list(own["eager_iters"])
        own["hold_timeouts"] = policy.timeouts if "held" in kinds else int(reported.get("hold_timeouts") or 0)
        own["min_launches"] = min(launches) if launches else None
        own["graph_latency_ms"] = [self.graph_samples[i] for i in sorted(self.graph_samples)]
        own.update(self.cupti if self.cupti is not None else timing.untraced_lists())
        own["cupti_timed_iters"] = self._traced_iterations(warmup)   # phase_pairs pairs by it
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
    release_buffers(run, watch)      # what the worker's threads do meanwhile is watched like any op
    return watch.finish(trace, measured)


RELEASE_TIMEOUT_S = 30.0


def release_buffers(run: SolutionRun, watch: Optional["_Watch"] = None) -> None:
    """After a workload: the worker drops its buffer sets and returns its cached device memory
    (worker op ``release``).  One bench keeps a worker per candidate and pauses the ones not being
    judged; without this each paused worker kept 10-22 GB of the inputs it last synthesised, and
    MoE's T = 11948 / 14107 or the indexer's 64 x 128K ran out of an 80 GB card's memory in the
    next candidate's input synthesis (results/h100/2026-12-07-imprecise64-gate).  Through
    ``watch`` the reply counts like any other (tampering, protected files); a worker that does not
    answer within ``RELEASE_TIMEOUT_S`` is ended, and its next workload starts a fresh one."""
    session = run.session
    if not session.alive:
        return
    request = watch.request if watch is not None else session.request
    reply = request({"op": "release"}, min(RELEASE_TIMEOUT_S, session.timeouts.alloc_s))
    if not reply.get("ok"):
        session.kill()


# -- one evaluation, phase by phase ------------------------------------------------------------
@dataclass
class _Judging:
    """What one evaluation carries from phase to phase (``_evaluate``): the solution's run, the
    workload, the watch over the worker's replies, the report being filled, and what the
    correctness and timing phases found."""

    run: SolutionRun
    ctx: WorkloadContext
    watch: _Watch
    gate: GateReport
    load: Dict[str, Any]                          # the worker's reply to ``load``
    sets: List[Dict[str, Any]] = field(default_factory=list)   # the shared buffer sets
    load_threads: int = -1                        # native threads after the import (-1: unknown)
    load_children: int = 0
    first_call_threads: Optional[int] = None
    correctness: Optional[Correctness] = None
    # the timing phase, over the trials
    plan: Optional[TimingPlan] = None             # this candidate's own timed inputs
    notes: Dict[str, Any] = field(default_factory=dict)
    clocks: ClockTrials = field(default_factory=ClockTrials)   # per trial: clocks, traced calls, their pairs
    graph_lat: List[float] = field(default_factory=list)
    kernels: Dict[str, List[float]] = field(default_factory=dict)
    durations: Dict[str, List[float]] = field(default_factory=dict)   # CUPTI: each record's us per kernel name
    launched: Optional[Dict[str, int]] = None     # CUDA: Triton kernels the solution launched (while traced)
    launches: Dict[str, List[float]] = field(default_factory=dict)
    # the headline clock's decision and the record made from it (``_decide_headline``)
    headline: Any = None
    perf: Optional[Performance] = None

    @property
    def cfg(self) -> GateConfig:
        return self.ctx.cfg

    @property
    def session(self) -> WorkerSession:
        return self.run.session

    def reject(self, reason: str, message: str, check: Optional[CheckResult] = None) -> Trace:
        return _rejected(self.ctx, self.run, reason, message, self.gate, check)

    def failed(self, reply: Dict[str, Any]) -> Trace:
        return _failed(self.ctx, self.run, reply, self.gate)

    def files_changed(self) -> Optional[Trace]:
        """FILE_TAMPERED when a protected file changed during one of the solution's calls."""
        if self.watch.files:
            return self.reject(guards.FILE_TAMPERED,
                               f"protected files changed during a call of the solution: {self.watch.files[:8]}")
        return None


def _evaluate(run: SolutionRun, ctx: WorkloadContext, watch: _Watch) -> Tuple[Trace, Optional[Performance]]:
    """One evaluation, phase by phase (``_PHASES``).  The first phase that returns a trace (a
    rejection or a failure) ends it, so the order of the phases, and of the checks inside each,
    decides which reason a solution gets.  Returns the trace and the measured performance (None
    before the headline is decided), which ``_Watch.finish`` keeps in a tampering rejection."""
    if run.compile_failed is not None:
        return _failed(ctx, run, run.compile_failed), None
    failed = _start_worker(run, ctx, watch)
    if failed is not None:
        return failed, None
    ev = _Judging(run, ctx, watch, gate=GateReport(trials=ctx.cfg.trials), load=run.session.load_reply,
                  clocks=ClockTrials())
    for phase in _PHASES:
        stop = phase(ev)
        if stop is not None:
            return stop, ev.perf
    return _passed(ev), ev.perf


def _start_worker(run: SolutionRun, ctx: WorkloadContext, watch: _Watch) -> Optional[Trace]:
    """Start (or restart) the solution's worker unless it runs; a worker that does not come up
    fails the evaluation (a COMPILE_ERROR is kept: the next workloads fail the same way without
    building again).  Then the watch takes the load reply and the worker's log starts afresh."""
    session = run.session
    if not session.alive:
        reply = session.start() if session.proc is None else session.restart()
        if not reply.get("ok"):
            if reply.get("status") == "COMPILE_ERROR":
                run.compile_failed = reply
            return _failed(ctx, run, reply)
    watch.note(session.load_reply)
    session.new_log()
    return None


def _check_load(ev: _Judging) -> Optional[Trace]:
    """What importing the solution did: protected files changed (FILE_TAMPERED), the worker's
    integrity snapshot misses this definition (INTEGRITY_INCOMPLETE; a gap elsewhere is a
    warning), Python threads started (BACKGROUND_THREAD)."""
    load, watch = ev.load, ev.watch
    if watch.files:
        return ev.reject(guards.FILE_TAMPERED, f"protected files changed while loading: {watch.files[:8]}")
    gaps = list(load.get("integrity_gaps") or [])
    own_gaps = integrity.gap_concerns(gaps, ev.ctx.builtin.base_name)
    if own_gaps:
        return ev.reject(guards.INTEGRITY_INCOMPLETE,
                         f"the worker's integrity snapshot misses this definition: {own_gaps[:3]}")
    ev.gate.warnings += [f"{guards.INTEGRITY_INCOMPLETE}: not snapshotted in the worker: {g}" for g in gaps]
    if ev.cfg.guards and load.get("py_threads", 0) > load.get("py_threads_before", 1 << 30):
        return ev.reject(guards.BACKGROUND_THREAD,
                         f"importing the solution started {load['py_threads'] - load['py_threads_before']} Python "
                         "thread(s): work can run outside the measured call")
    return None


def _allocate_buffers(ev: _Judging) -> Optional[Trace]:
    """The worker allocates the shared buffer sets, which must be what was asked, none sharing
    memory with another (``guards.buffer_sets_problem``), and, with the guards, the worker's own
    reply (``_out_of_step``); the thread and child counts at load are kept for the checks after
    each call."""
    ctx = ev.ctx
    reply = ev.watch.request({"op": "alloc", "sets": ctx.nsets, "samples": 0,
                              "inputs": ctx.input_meta, "outputs": ctx.output_meta}, ev.session.timeouts.alloc_s)
    if not reply.get("ok"):
        return ev.failed(reply)
    problem = guards.buffer_sets_problem(reply.get("sets"), ctx.nsets, ctx.input_meta, ctx.output_meta, ctx.device)
    if problem is not None:
        return ev.reject(guards.GATE_TAMPERED, f"the worker's alloc reply: {problem}")
    if ev.cfg.guards:
        stop = _out_of_step(ev)
        if stop is not None:
            return stop
    ev.sets = reply["sets"]
    ev.load_threads = ev.load.get("threads", -1)
    ev.load_children = ev.load.get("children", 0)
    return None


# -- 1. correctness on fresh inputs per trial ----------------------------------------------------
def _check_correctness(ev: _Judging) -> Optional[Trace]:
    """Phase 1: one call per correctness trial (``_correctness_call``), and with the guards a
    second call on trial 0's inputs (``_check_determinism``); records ``ev.correctness``: the
    contest statistics and the strict errors, each the worst over the trials."""
    worst = CheckResult(EvaluationStatus.PASSED)
    checks: List[CheckResult] = []
    for t, trial in enumerate(ev.ctx.trials):
        stop, check = _correctness_call(ev, t, trial)
        if stop is not None:
            return stop
        checks.append(check)
        worst.max_absolute_error = max(worst.max_absolute_error, check.max_absolute_error)
        worst.max_relative_error = max(worst.max_relative_error, check.max_relative_error)
        worst.matched_ratio = min(worst.matched_ratio, check.matched_ratio)
        if ev.cfg.guards and t == 0:
            stop = _check_determinism(ev, trial)
            if stop is not None:
                return stop
    tolerance = ev.ctx.builtin.tolerance
    worst.rule, worst.strict = tolerance.rule, worst_strict(checks)
    ev.correctness = Correctness(max_absolute_error=_nn(worst.max_absolute_error),
                                 max_relative_error=_nn(worst.max_relative_error),
                                 extra=worst.verdict_record(tolerance))
    return None


def _correctness_call(ev: _Judging, t: int, trial: Trial) -> Tuple[Optional[Trace], Optional[CheckResult]]:
    """Trial ``t`` on buffer set 0 (inputs filled, outputs poisoned), then in order: protected
    files, the call's own failure, threads (``_threads_left_by_call``), inputs changed
    (INPUT_MUTATED), child processes (CHILD_PROCESS), the outputs (TOLERANCE or the checker's
    reason).  Returns (a rejection or None, the check)."""
    from kernelwright.gate.worker import poison

    ctx, sets = ev.ctx, ev.sets
    _fill_inputs(ctx, sets[0]["inputs"], trial)
    poison(sets[0]["outputs"], 0)
    timing.sync(ctx.device)
    reply = ev.watch.request({"op": "call", "set": 0, "scalars": ctx.scalars(trial)}, ev.session.timeouts.call_s)
    bad = ev.files_changed()
    if bad is not None:
        return bad, None
    if not reply.get("ok"):
        return ev.failed(reply), None
    if ev.first_call_threads is None:
        ev.first_call_threads = reply.get("threads", -1)
    stop = _threads_left_by_call(ev, reply)
    if stop is not None:
        return stop, None
    changed = _inputs_unchanged(ctx, sets[0]["inputs"], trial)
    if changed:
        return ev.reject(guards.INPUT_MUTATED, f"input {changed!r} was modified by the call"), None
    if ev.cfg.guards and reply.get("children", 0) > ev.load_children:
        return ev.reject(guards.CHILD_PROCESS, "child processes left running after the call"), None
    check = check_outputs(ctx.builtin.checker, _outputs_of(ctx, sets[0]["outputs"]), trial.expected,
                          ctx.builtin.tolerance, trial.inputs, trial.exemption)
    if not check.passed:
        return ev.reject(check.reason or guards.TOLERANCE, f"trial {t}: {check.detail}", check), None
    return None, check


def _threads_left_by_call(ev: _Judging, reply: Dict[str, Any]) -> Optional[Trace]:
    """BACKGROUND_THREAD (guards) after a correctness call: more Python threads than at load,
    native threads the solution's calls started that are still alive beyond
    ``guards.CALL_THREADS_ALLOWED``, or native threads alive since the import beyond
    ``guards.THREADS_SINCE_LOAD_ALLOWED`` (a thread a call started can start more after the call
    returns: red-team case native_thread_trampoline)."""
    load_threads = ev.load_threads
    call_threads = reply.get("call_threads") or []
    since_load = reply.get("threads", -1) - load_threads if load_threads >= 0 else 0
    if ev.cfg.guards and (reply.get("py_threads", 0) > ev.load.get("py_threads", 1 << 30)
                          or len(call_threads) > guards.CALL_THREADS_ALLOWED
                          or since_load > guards.THREADS_SINCE_LOAD_ALLOWED):
        return ev.reject(guards.BACKGROUND_THREAD,
                         f"threads still running after the call: {reply.get('threads')} native "
                         f"(at load {load_threads}), {reply.get('py_threads')} Python; started by the "
                         f"solution's calls: {call_threads}; "
                         f"since the import: {reply.get('new_threads') or '?'}")
    return None


def _check_determinism(ev: _Judging, trial: Trial) -> Optional[Trace]:
    """Determinism and uninitialised memory: the same inputs on buffer set 1, the other poison,
    a churned allocator; the outputs must pass again (NONDETERMINISTIC)."""
    from kernelwright.gate.worker import poison

    ctx, sets = ev.ctx, ev.sets
    _fill_inputs(ctx, sets[1]["inputs"], trial)
    poison(sets[1]["outputs"], 1)
    timing.sync(ctx.device)
    reply = ev.watch.request({"op": "call", "set": 1, "scalars": ctx.scalars(trial), "churn": True},
                             ev.session.timeouts.call_s)
    bad = ev.files_changed()
    if bad is not None:
        return bad
    if not reply.get("ok"):
        return ev.failed(reply)
    changed = _inputs_unchanged(ctx, sets[1]["inputs"], trial)
    if changed:
        return ev.reject(guards.INPUT_MUTATED, f"input {changed!r} was modified by the call")
    again = check_outputs(ctx.builtin.checker, _outputs_of(ctx, sets[1]["outputs"]), trial.expected,
                          ctx.builtin.tolerance, trial.inputs, trial.exemption)
    if not again.passed:
        return ev.reject(guards.NONDETERMINISTIC, f"a second run on the same inputs failed: {again.detail}", again)
    return None


# -- 2. timing (fresh input contents every iteration, a twin, rotating buffers, sampled checks) ----
def _time_trials(ev: _Judging) -> Optional[Trace]:
    """Phase 2: this candidate's timed inputs (``_plan_timing``), then one time op per trial,
    each judged as it returns (``_time_trial``)."""
    _plan_timing(ev)
    for t in range(ev.cfg.trials):
        stop = _time_trial(ev, t)
        if stop is not None:
            return stop
    return None


def nonce_commitment(nonce: str) -> str:
    """What a trace records of the run's input nonce: its SHA-256 (hex), which the nonce in
    summary.json can be checked against and which tells nothing of the seeds."""
    import hashlib

    return hashlib.sha256(nonce.encode()).hexdigest()


def _plan_timing(ev: _Judging) -> None:
    """This candidate's own timed inputs (``TimingPlan``) and the notes that say how they were
    drawn; a workload whose fixed inputs leave no twin gets a FIXED_INPUTS warning."""
    cfg = ev.cfg
    ev.plan = plan = ev.ctx.plan_for(candidate_key(ev.run))
    ev.notes = {"input_nonce_sha256": nonce_commitment(cfg.nonce), "input_candidate": plan.candidate}
    fixed_note = ev.ctx.fresh_note()
    if fixed_note:
        ev.notes["fixed_inputs"] = fixed_note
        if plan.twins and all(t is None for t in plan.twins) and cfg.guards:
            ev.gate.warnings.append(f"FIXED_INPUTS: {fixed_note}")


def _time_trial(ev: _Judging, t: int) -> Optional[Trace]:
    """Trial ``t``: the time op and its exchange, then in order the sampled outputs, the inputs
    and threads after the loop, the clocks; a trial that passes adds its samples to the
    evaluation's (``_collect_trial``)."""
    stop, talk, reply = _run_time_op(ev, t)
    if stop is not None:
        return stop
    stop, s = _trial_samples(ev, talk, reply)
    if stop is not None:
        return stop
    stop = _check_timed_outputs(ev, t, talk)
    if stop is None:
        stop = _check_after_timed_loop(ev, talk, reply)
    if stop is None:
        stop = _check_trial_clocks(ev, t, s, reply)
    if stop is not None:
        return stop
    _collect_trial(ev, talk, s, reply["host_ops"])
    return None


def _run_time_op(ev: _Judging, t: int) -> Tuple[Optional[Trace], "_TimingConversation", Dict[str, Any]]:
    """Send trial ``t``'s time op (CUPTI traces its held calls, ``GateConfig.cupti_tracing``;
    trial 0 also runs the graph replays and the profiled call) and answer its steps
    (``_TimingConversation``).  Then protected files, the
    op's own failure and, with the guards, a ping with a fresh nonce: the next reply must answer
    the next message (a forged early reply leaves the real one queued, and it would arrive here
    instead of the pong: GATE_TAMPERED).  Returns (a rejection or None, the conversation, the reply)."""
    ctx, cfg, plan, session = ev.ctx, ev.cfg, ev.plan, ev.session
    specs = plan.timing_specs[t] if cfg.guards else [plan.timing_seeds[t][0]] * len(plan.timing_seeds[t])
    with_graph = t == 0 and bool(cfg.graph_iterations)
    msg = _time_message(ctx, len(specs), graph_iterations=len(plan.graph_seeds) if with_graph else 0,
                        trace_held=cfg.cupti_tracing, profile_kernels=t == 0)
    talk = _TimingConversation(ctx, t, ev.sets, specs, with_graph, plan=plan)
    reply = ev.watch.request(msg, session.timeouts.timing_op_s(msg["iterations"] + msg["graph_iterations"]
                                                               + 1), on_step=talk)
    bad = ev.files_changed()
    if bad is not None:
        return bad, talk, reply
    if not reply.get("ok"):
        return ev.failed(reply), talk, reply
    return (_out_of_step(ev) if cfg.guards else None), talk, reply


def _out_of_step(ev: _Judging) -> Optional[Trace]:
    """A ping with a fresh nonce, whose pong must be the next reply: a reply forged through the
    pipe leaves the real one queued, and it arrives here instead (GATE_TAMPERED; the worker is
    killed, so the next workload starts a fresh one)."""
    nonce = int.from_bytes(os.urandom(8), "little")
    pong = ev.watch.request({"op": "ping", "nonce": nonce}, ev.session.timeouts.call_s)
    if pong.get("pong") == nonce:
        return None
    ev.session.kill()
    return ev.reject(guards.GATE_TAMPERED, "the worker's replies are out of step with the parent's messages")


def _trial_samples(ev: _Judging, talk: "_TimingConversation",
                   reply: Dict[str, Any]) -> Tuple[Optional[Trace], Dict[str, Any]]:
    """The trial's samples from the parent's own records (``headline_samples``).  Samples the
    worker edited after sending them (its per-iteration samples, CUPTI's lists) are noted as
    tampering (GATE_TAMPERED when the evaluation ends); an exchange out of step with the
    parent's (a violation, iterations missing) rejects now (GATE_TAMPERED), and so, with the
    guards, do CUPTI lists that show the gate's tracer tampered with (``_check_tracer``).
    Returns (a rejection or None, the samples)."""
    s, edited = talk.headline_samples(reply["samples"], ev.cfg.warmup)
    if edited and ev.cfg.guards:
        ev.watch.other = list(dict.fromkeys(ev.watch.other + [f"timing samples edited in the worker: {edited[:6]}"]))
    specs = talk.specs
    if talk.violations or talk.done != len(specs) - 1:
        ev.session.kill()
        return ev.reject(guards.GATE_TAMPERED,
                         "the worker's timing exchange is out of step with the parent's: "
                         f"{(talk.violations or [f'{talk.done + 1} of {len(specs)} iterations reported'])[:3]}"), s
    if talk.tracer_problems and ev.cfg.guards:
        return ev.reject(guards.GATE_TAMPERED, f"CUPTI's records of the traced calls are not the gate's tracer's: "
                                               f"{talk.tracer_problems[:3]}"), s
    return None, s


def _check_timed_outputs(ev: _Judging, t: int, talk: "_TimingConversation") -> Optional[Trace]:
    """STALE_OUTPUT: a timed iteration the parent copied (the twin, the draws) is wrong for the
    inputs of its own spec."""
    ctx = ev.ctx
    for it in sorted(talk.snapshots):
        ref = ctx.sample_trial(talk.specs[it])
        check = check_outputs(ctx.builtin.checker, _outputs_of(ctx, talk.snapshots[it]), ref.expected,
                              ctx.builtin.tolerance, ref.inputs, ref.exemption)
        if not check.passed:
            twin = " (a twin of an earlier iteration: an output cache keyed on pointers/input values?)" \
                if it == ev.plan.twins[t] else ""
            return ev.reject(guards.STALE_OUTPUT,
                             f"timed iteration {it} of trial {t} returned a wrong output for its inputs{twin} "
                             f"({check.detail})", check)
    return None


def _check_after_timed_loop(ev: _Judging, talk: "_TimingConversation", reply: Dict[str, Any]) -> Optional[Trace]:
    """With the guards, after the timed loop: every buffer set still holds the inputs of the last
    spec the parent served it (INPUT_MUTATED); no Python or native threads left beyond the load's
    (BACKGROUND_THREAD); no child processes (CHILD_PROCESS)."""
    if not ev.cfg.guards:
        return None
    ctx = ev.ctx
    for set_index, spec in talk.last_spec_by_set.items():   # the parent's own record
        expected = ctx.inputs_of(spec)
        it = iter(ev.sets[set_index]["inputs"])
        for name, shape, _ in ctx.input_meta:
            if shape is not None and not guards.bitwise_equal(next(it), expected[name]):
                return ev.reject(guards.INPUT_MUTATED, f"input {name!r} was modified during the timed iterations")
    load_threads = ev.load_threads
    if reply.get("py_threads", 0) > ev.load.get("py_threads", 1 << 30) or (
            reply["threads_after"] > reply["threads_before"] >= 0) or (
            load_threads >= 0 and reply["threads_after"] - load_threads > guards.THREADS_SINCE_LOAD_ALLOWED):
        return ev.reject(guards.BACKGROUND_THREAD,
                         f"threads: at load {load_threads}, after the first call {ev.first_call_threads}, "
                         f"timed loop {reply['threads_before']} -> {reply['threads_after']}")
    if reply["children_after"] > ev.load_children:
        return ev.reject(guards.CHILD_PROCESS, "child processes left running")
    return None


def _check_trial_clocks(ev: _Judging, t: int, s: Dict[str, Any], reply: Dict[str, Any]) -> Optional[Trace]:
    """The trial's clocks (TIMER_INCONSISTENT): impossible samples (``ClockTrials.add``), latencies
    that sum to more than the parent's wall clock of the phase, a worker clock that saw far less
    time than the parent's.  ``ClockTrials.add`` also keeps the trial's traced calls and pairs each
    held call's events with its own kernel time (judged in ``_check_phases``)."""
    cfg = ev.cfg
    lat = s.get("latency_ms") or []
    impossible = ev.clocks.add(s)
    if impossible:
        return ev.reject(guards.TIMER_INCONSISTENT, impossible)
    parent_wall = reply.get("parent_wall_s", math.inf)
    if sum(lat) / 1e3 > parent_wall * guards.PARENT_WALL_SLACK:
        return ev.reject(guards.TIMER_INCONSISTENT,
                         "reported latencies exceed the parent's wall clock for the timing phase")
    op_wall = reply.get("op_wall_s")
    if cfg.guards and op_wall is not None and math.isfinite(parent_wall) and \
            op_wall < guards.WORKER_WALL_MIN_FRACTION * parent_wall - guards.WORKER_WALL_SLACK_S:
        return ev.reject(guards.TIMER_INCONSISTENT,
                         f"the worker's clock saw {op_wall:.3f} s for a timing phase the parent saw take "
                         f"{parent_wall:.3f} s")
    return None


def _collect_trial(ev: _Judging, talk: "_TimingConversation", s: Dict[str, Any],
                   host_ops: Dict[str, List[float]]) -> None:
    """Add one trial's observations to the evaluation's: launches (CPU provenance; the profiled
    call's ``host_ops``, as the parent tallied them, went to ``_Watch`` with the op's reply and
    are listed with its kernels here), the graph replays (``_collect_graph``), the kernel records
    of the traced held calls (every trial's: provenance judges them together) and the Triton
    kernels launched there.  Their kernel times went to ``ClockTrials`` with the trial's samples."""
    watch = ev.watch
    if s.get("min_launches") is not None:
        watch.note({"launches": s["min_launches"]})
    for name, (count, total) in (s.get("launches") or {}).items():
        agg = ev.launches.setdefault(name, [0, 0.0])
        agg[0] += count
        agg[1] += total
    _collect_graph(ev, talk, s)
    if s.get("cupti_error"):
        ev.notes["cupti"] = s["cupti_error"]
    for name, v in list(s.get("kernels", {}).items()) + list(host_ops.items()):
        agg = ev.kernels.setdefault(name, [0, 0.0])
        agg[0] += v[0]
        agg[1] += v[1]
    for name, values in (s.get("kernel_durations") or {}).items():
        ev.durations.setdefault(name, []).extend(float(x) for x in values)
    if s.get("launched") is not None:
        launched = dict(ev.launched or {})
        for name, n in s["launched"].items():
            launched[name] = launched.get(name, 0) + int(n)
        ev.launched = launched


def _collect_graph(ev: _Judging, talk: "_TimingConversation", s: Dict[str, Any]) -> None:
    """The graph replays' median latency, kept only when every checked replay was reported done
    and gave the right outputs (otherwise a note says why it is not reported)."""
    ctx, plan = ev.ctx, ev.plan
    if s.get("graph_latency_ms"):
        graph_ok = True
        for it in plan.graph_plan:
            if it not in talk.graph_snapshots:
                graph_ok = False
                ev.notes["graph"] = f"graph replay {it} was never reported done; graph latency not reported"
                continue
            ref = ctx.sample_trial(plan.graph_seeds[it])
            check = check_outputs(ctx.builtin.checker, _outputs_of(ctx, talk.graph_snapshots[it]), ref.expected,
                                  ctx.builtin.tolerance, ref.inputs, ref.exemption)
            if not check.passed:
                graph_ok = False
                ev.notes["graph"] = f"graph replay gave wrong outputs ({check.detail}); graph latency not reported"
        if graph_ok:
            ev.graph_lat.append(statistics.median(s["graph_latency_ms"]))
    elif s.get("graph_error"):
        ev.notes["graph"] = s["graph_error"]


# -- 3. the headline and the checks on it ---------------------------------------------------------
def _decide_headline(ev: _Judging) -> None:
    """Phase 3: the headline clock over the trials (``ClockTrials.decide``, gate/headline.py) and
    the Performance record; device time far below the graph replay of the same call marks the
    trace SUSPICIOUS (DEVICE_GRAPH_MISMATCH)."""
    notes, gate = ev.notes, ev.gate
    headline = ev.clocks.decide(trusted=ev.session.trusted)
    latency = headline.latency_ms
    notes["clock"] = {"headline": headline.clock, **headline.notes}
    ref_ms = ev.ctx.reference_latency_ms()
    graph_ms = float(statistics.mean(ev.graph_lat)) if ev.graph_lat else None
    kernel_ms, span_ms = ev.clocks.kernel_time_ms()
    ev.perf = Performance(latency_ms=latency, reference_latency_ms=ref_ms, speedup_factor=ref_ms / latency,
                          eager_latency_ms=headline.eager_ms, clock=headline.clock, graph_latency_ms=graph_ms,
                          kernel_time_ms=kernel_ms, kernel_span_ms=span_ms,
                          timing_method=timing.device_clock_label(headline.clock, ev.clocks.hold_kind),
                          latency_samples_ms=[round(x, 6) for x in headline.per_trial_ms])
    ev.headline = headline
    ratio, mismatch = graph_agreement(headline, graph_ms)
    if ratio is not None:
        notes["clock"]["device_vs_graph"] = round(ratio, 3)
        why = graph_disagreement(graph_ms * ratio, graph_ms, kernel_ms, span_ms)   # trial 0's device time
        if why:
            notes["clock"]["device_vs_graph_why"] = why
    phase = ev.clocks.phase_ratios()
    if any(r is not None for r in phase):   # per trial: timed / traced kernel time on the same inputs
        notes["clock"]["timed_vs_traced"] = [None if r is None else round(r, 3) for r in phase]
    if mismatch and ev.cfg.guards:
        gate.suspicious = True
        gate.reasons.append(guards.DEVICE_GRAPH_MISMATCH)
        notes["suspicious"] = mismatch
    return None


def _check_unmeasured_work(ev: _Judging) -> Optional[Trace]:
    """Phase 4 (CUDA, guards), UNMEASURED_WORK: the device-synchronised wall clock against the
    events (``ClockTrials.unmeasured_work``), then the CUPTI span over all streams of trial 0's
    traced calls against the events of the same kind of calls, held or eager
    (``cupti_span_reference``; every trial's traced calls are judged call by call in
    ``_check_phases``)."""
    if not (ev.ctx.device.type == "cuda" and ev.cfg.guards):
        return None
    unmeasured = ev.clocks.unmeasured_work(ev.headline)
    if unmeasured:
        return ev.reject(guards.UNMEASURED_WORK, unmeasured)
    span_ref = cupti_span_reference(ev.clocks, ev.headline)   # like with like: held or eager traced calls
    window = ev.clocks.window(0)
    if window and window[1] > guards.CUPTI_SPAN_FACTOR * span_ref + guards.CUPTI_SPAN_SLACK_MS:
        return ev.reject(guards.UNMEASURED_WORK,
                         f"CUPTI span {window[1]:.3f} ms over all streams vs events {span_ref:.3f} ms")
    return None


def _check_phases(ev: _Judging) -> Optional[Trace]:
    """Phase 5 (guards), PHASE_MISMATCH.  CUPTI traces every held timed call, so each pair is one
    call: its events against the kernel time CUPTI saw it run on any stream, min(sum, span).  A
    call whose kernels outlast its end event (work on a private stream never joined back, case
    ``unjoined_small``) shows timed calls faster than the kernels they ran, trial by trial
    (``ClockTrials.phase_mismatch``);
    then, as a backstop, every later trial's median against the smaller of trial 0's and trial
    0's traced kernel time (CUDA, ``guards.trial_phase_verdict``); and an eager headline, timed
    by the untraced idle calls, trial by trial against the kernel time of the same trial's traced
    calls (CUDA, ``guards.eager_kernel_verdict``).  GPU only in effect: on CPU the interpreter's
    per-launch cost swamps the compute (docs/gate.md, section 3, item 6)."""
    if not ev.cfg.guards:
        return None
    reason, message = ev.clocks.phase_mismatch()
    if reason is not None:
        return ev.reject(reason, message)
    window = ev.clocks.window(0)
    if ev.ctx.device.type == "cuda" and window:
        reason, message = guards.trial_phase_verdict(ev.headline.per_trial_ms, *window)
        if reason is not None:
            return ev.reject(reason, message)
    if ev.ctx.device.type == "cuda" and ev.headline.clock == "eager":
        per_trial = ev.headline.per_trial_ms
        reason, message = guards.eager_kernel_verdict(per_trial, [ev.clocks.window(t) for t in range(len(per_trial))])
        if reason is not None:
            return ev.reject(reason, message)
    return None


def _check_provenance(ev: _Judging) -> Optional[Trace]:
    """Phase 6, provenance by launch: the kernels of the traced held calls attributed
    to the solution (the Triton kernels the worker saw it launch, the ``__global__`` names of its
    CUDA sources, vendor patterns first) go into ``gate.kernels``; where a kernel of its own is
    required, CPU judges the Triton launches and host ops (``guards.cpu_provenance_verdict``),
    CUDA the kernel records (``guards.provenance_verdict``): NO_KERNELS, VENDOR_KERNELS, HOST_COMPUTE."""
    ctx, cfg, run, sources = ev.ctx, ev.cfg, ev.run, ev.session.solution.sources
    cuda = ctx.device.type == "cuda"
    declared = guards.own_kernel_names({src.path: src.content for src in sources if not src.path.endswith(".py")})
    split = guards.attribute_kernels(ev.kernels, ev.launched, ev.durations, declared) if cuda else {}
    own = guards.own_kernel_names({src.path: src.content for src in sources})
    ev.gate.kernels = [KernelRecord(name=n, count=int(v[0]), total_us=float(v[1]),
                                    origin=guards.kernel_origin(n, split) if split else guards.classify_kernel(n, own))
                       for n, v in sorted(ev.kernels.items(), key=lambda kv: -kv[1][1])[:30]]
    if not (cfg.guards and run.requires_kernel and ctx.builtin.requires_kernel):
        return None
    if ev.load.get("counts_launches"):
        out_elements = sum(math.prod(shape) for _, shape, _ in ctx.output_meta)
        watch = ev.watch
        if watch.unlowered:
            name, why = next(iter(watch.unlowered.items()))
            return ev.failed({"status": "COMPILE_ERROR", "reason": guards.BUILD_FAILED,
                              "error": f"{name} runs under the interpreter but is not a GPU kernel: {why}"})
        reason, message = guards.cpu_provenance_verdict(ev.launches, watch.host_ops, out_elements,
                                                        watch.min_launches if watch.min_launches is not None else 0)
        return ev.reject(reason, message) if reason is not None else None
    reason, message = guards.provenance_verdict(ev.kernels, cpu_ops=not cuda, own_names=declared if cuda else own,
                                                launched=ev.launched if cuda else None, durations=ev.durations)
    if reason is not None and (ev.kernels or cuda):
        return ev.reject(reason, message)
    return None


def _check_ablation(ev: _Judging) -> Optional[Trace]:
    """Phase 7, provenance ablation (CPU, guards, a kernel required, launches counted): one call
    whose launches run with every Triton store dropped, and every atomic into the outputs (all of
    them for a value-returning solution: ``interpreted.WriteAblation``); if the outputs still come
    out right, something else wrote them (torch under DisableTorchFunction, numpy, around a launch or
    inside one: cases ``hidden_host_compute``, ``jit_helper_hidden_compute``): HOST_COMPUTE.  The call
    runs on inputs of its own, drawn for this candidate (``ablation_trial``) and never shown
    before, with the poison of every set-0 correctness call, so that nothing in its inputs or
    outputs tells it from those (case ``ablation_input_replay``).  Not judged where a constant
    fill could produce the reference (all its elements equal).  A crash or an exception here
    decides nothing: an honest solution may fail without its kernels."""
    ctx, cfg, run = ev.ctx, ev.cfg, ev.run
    if not (cfg.guards and ctx.device.type == "cpu" and run.requires_kernel and ctx.builtin.requires_kernel
            and ev.load.get("counts_launches")):
        return None
    trial = ablation_trial(ctx, candidate_key(run))
    if _constant_reference(trial.expected):
        return None
    from kernelwright.gate.worker import poison

    sets = ev.sets
    _fill_inputs(ctx, sets[0]["inputs"], trial)
    poison(sets[0]["outputs"], 0)
    reply = ev.watch.request({"op": "call", "set": 0, "scalars": ctx.scalars(trial), "ablate": True},
                             ev.session.timeouts.call_s)
    bad = ev.files_changed()
    if bad is not None:
        return bad
    if reply.get("ok") and check_outputs(ctx.builtin.checker, _outputs_of(ctx, sets[0]["outputs"]),
                                         trial.expected, ctx.builtin.tolerance, trial.inputs,
                                         trial.exemption).passed:
        return ev.reject(guards.HOST_COMPUTE,
                         "with Triton's stores dropped (and its atomics into the outputs), the call still produced the right outputs: "
                         "the work ran outside the solution's kernels")
    return None


def ablation_trial(ctx: WorkloadContext, candidate: str) -> Trial:
    """The provenance ablation's inputs and reference: a trial of its own, seeded from the run,
    the workload and ``candidate`` (the run's nonce in the seed: no solution predicts it)."""
    cfg = ctx.cfg
    return ctx.generate(seed_for(cfg.salt, cfg.split, ctx.workload.uuid, cfg.nonce, "ablation", candidate))


# the phases after the worker is up, in the order that decides which reason a solution gets
_PHASES = (_check_load, _allocate_buffers, _check_correctness, _time_trials, _decide_headline,
           _check_unmeasured_work, _check_phases, _check_provenance, _check_ablation)


def _passed(ev: _Judging) -> Trace:
    """The PASSED trace: the roofline (``_note_roofline``), a persisting-L2 limit the solution set
    (L2_PERSISTENCE: SUSPICIOUS), every note."""
    _note_roofline(ev)
    gate, notes = ev.gate, ev.notes
    if ev.watch.l2_limit > 0:
        gate.suspicious = True
        gate.reasons.append(guards.L2_PERSISTENCE)
        notes["l2_persistence"] = (f"the solution set a persisting-L2 limit of {ev.watch.l2_limit} bytes; the gate "
                                   "resets persisting lines and the limit before every timed iteration")
    gate.notes = notes
    return _trace(ev.ctx, ev.run, EvaluationStatus.PASSED, log=ev.session.new_log(), correctness=ev.correctness,
                  performance=ev.perf, gate=gate)


def _note_roofline(ev: _Judging) -> None:
    """Where the definition has a roofline model and the device its ceilings: the floor, the
    fraction of it reached, the achieved rates; a latency below the floor at the device's peak
    marks the trace SUSPICIOUS (BELOW_ROOFLINE)."""
    ctx, gate, notes = ev.ctx, ev.gate, ev.notes
    latency = ev.headline.latency_ms
    ceilings = ceilings_for_run(ctx.device) if ctx.builtin.roofline is not None else None
    if ceilings is None:
        return
    work = ctx.roofline()
    floor_ms = work.floor_s(ceilings["measured"]) * 1e3
    gate.roofline_floor_ms = floor_ms
    gate.roofline_fraction = floor_ms / latency
    notes["roofline"] = {"flops": work.flops, "bytes": work.bytes, "unit": work.unit,
                         "launch_latency_us": ceilings["measured"].get("launch_latency_s", 0.0) * 1e6,
                         "achieved_TBps": work.bytes / (latency * 1e-3) / 1e12,
                         "achieved_TFLOPs": work.flops / (latency * 1e-3) / 1e12}
    if latency < work.floor_s(ceilings["peak"]) * 1e3 * guards.ROOFLINE_MARGIN:
        gate.suspicious = True
        gate.reasons.append(guards.BELOW_ROOFLINE)
        notes["suspicious"] = (f"{latency * 1e3:.1f} us is below the physical floor "
                               f"{work.floor_s(ceilings['peak']) * 1e6:.1f} us at the device's peak")


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
    if not reply.get("ok") or guards.buffer_sets_problem(reply.get("sets"), 2, ctx.input_meta, ctx.output_meta,
                                                         ctx.device) is not None:
        return None
    try:
        medians = _time_only_trials(run, ctx, reply["sets"])
    finally:
        release_buffers(run)
    return None if medians is None else float(statistics.mean(medians))


def _time_only_trials(run: SolutionRun, ctx: WorkloadContext, sets) -> Optional[List[float]]:
    """Each trial's median latency (ms) for ``time_only``; None when one of them fails."""
    session = run.session
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
    return medians
