"""The orchestrator's steps: one builder per kind, each returning a :class:`Job`.

A builder runs in the main thread and reads what its step needs from the state.  The Job it
returns holds four callables: ``claim`` moves the step's row to a running status (one
transaction), ``work`` runs in a worker thread and touches no state (an agent turn in its
worktree, or a gate evaluation in a subprocess) and returns one of the small result types
below, ``commit`` writes that result (one transaction, main thread), and ``fail`` records a
step whose work or commit raised.  ``orch`` is the orchestrator that runs them
(``workflow/loop.py``), seen through :class:`Host`: its state, config, worktrees, agent turns
and logging.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Protocol, Tuple

from kernelwright.workflow import prompts, roles, runs, worktrees
from kernelwright.workflow.evaljob import geomean_ratio
from kernelwright.workflow.leases import Lease
from kernelwright.workflow.config import RunConfig
from kernelwright.workflow.state import State, Tx, dumps, loads

# what a decision says when the verdict names no reason: FAILED, or for the hidden split the gate's
# HIDDEN_SPLIT_FAILED (spelled here: the workflow package stays torch-free, and gate.guards imports torch)
FAILED = "FAILED"
HIDDEN_SPLIT_FAILED = "HIDDEN_SPLIT_FAILED"


class Host(Protocol):
    """What a step uses of the orchestrator that runs it."""

    state: State
    cfg: RunConfig
    builtin: Any                      # the run's BuiltinDefinition
    run_dir: Path
    repo: Path
    evaluate: Callable[..., Dict[str, Any]]   # (request, lease, job_dir, timeout_s) -> verdict

    def say(self, msg: str) -> None: ...

    def worktree(self, agent: str) -> Path: ...

    def session(self, agent: str) -> Optional[str]: ...

    def common_context(self) -> Dict[str, str]: ...

    def turn_block(self, kind: str) -> Optional[str]: ...

    def turn(self, agent: str, workspace: Path, prompt: str, metadata: Dict[str, Any],
             lease: Optional[Lease] = None, session_id: Optional[str] = None) -> "TurnOutcome": ...

    def record_turn(self, tx: Tx, t: "TurnOutcome", cycle_id: Optional[int] = None, attempt_id: Optional[int] = None,
                    direction_id: Optional[int] = None) -> None: ...

    def queue_finals(self, cycle_id: int, ordered: List[Dict[str, Any]], merged: Optional[Dict[str, Any]],
                     decision: Optional[Dict[str, Any]]) -> None: ...


@dataclass
class Job:
    key: Tuple[str, Any]
    lease_kind: Optional[str]
    holder: str
    role: str
    claim: Callable[[], None]
    work: Callable[[Optional[Lease]], Any]
    commit: Callable[[Any], None]
    fail: Callable[[str], None]
    label: str = ""


@dataclass
class TurnOutcome:
    agent: str
    role: str
    result: Any                       # kernelwright.agents.TurnResult
    started_at: float
    meta: Dict[str, Any] = field(default_factory=dict)


@dataclass
class PlanResult:
    turns: List[TurnOutcome]
    plan: Optional[roles.Plan]        # None: no valid plan after the retries
    problems: List[str]               # why the last reply was not a valid plan


@dataclass
class CodeResult:
    turn: TurnOutcome
    report: worktrees.ChangeReport    # what the turn changed, against the run's edit surface
    outside_assignment: List[str]     # changed files outside the assignment's own surface
    sha: Optional[str]                # the attempt's commit (None: nothing committed)


@dataclass
class SynthesisResult:
    turn: Optional[TurnOutcome]       # None: the budget blocked the turn
    decision: Optional[roles.SynthesisDecision]
    sha: Optional[str]                # the merge's commit
    problem: Optional[str]            # why there is no decision (or no merge)
    blocked: Optional[str]            # the budget's reason, when it blocked the turn


@dataclass
class ProfileResult:
    tool: str                         # "ncu", "torch" or "none" (failed)
    text: str                         # the Markdown summary


@dataclass
class ResearchResult:
    turn: TurnOutcome
    brief: Optional[roles.ResearchBrief]


def esc(text: Any) -> str:
    """Text for a rich-markup log line (brackets in agent/gate text are not markup)."""
    from rich.markup import escape

    return escape(str(text))


def _noop() -> None:
    pass


def _direction_label(name: str) -> str:
    return esc("[" + name + "]")


# ---------------------------------------------------------------------------------- plan
def plan_job(orch: Host, cycle) -> Job:
    cycle_id, idx = cycle["id"], cycle["idx"]
    cfg = orch.cfg
    ctx = orch.common_context()
    blocked = _blocked_directions(orch)
    n_assign, coders = cfg.assignments_per_cycle, cfg.coders
    regimes = list(orch.builtin.regimes_order)
    prompt = prompts.planner_prompt(idx, n_assign, coders, regimes, blocked, ctx, cfg.edit_surface)
    state_meta = {"cycle": idx, "best": (runs.best(orch.state) or {}).get("id"),
                  "directions": {d["name"]: d["status"] for d in runs.directions_view(orch.state)},
                  "notes": [n["text"] for n in runs.notes_view(orch.state)]}
    base = runs.base_commit(orch.state)
    wt = orch.worktree("planner")
    session = orch.session("planner")

    def work(lease) -> PlanResult:
        worktrees.reset_worktree(wt, "wt/planner", base)
        worktrees.write_context(wt, ctx)
        turns, plan, problems, sid = [], None, [], session
        for attempt in range(cfg.planner_retries + 1):
            text = prompt if attempt == 0 else prompts.plan_retry_prompt(problems)
            t = orch.turn("planner", wt, text, {"cycle": idx, "retry": attempt, "state": state_meta}, session_id=sid)
            turns.append(t)
            if not t.result.ok:
                problems = [f"turn failed: {t.result.error}"]
                sid = session
                continue
            sid = t.result.session_id
            try:
                plan = roles.parse_plan(t.result.text, max_assignments=n_assign, max_coders=coders,
                                        run_surface=cfg.edit_surface, regimes=regimes, blocked=blocked)
                break
            except roles.ReplyError as exc:
                problems = exc.problems
        return PlanResult(turns, plan, problems)

    def fail(message: str) -> None:
        with orch.state.tx() as tx:
            tx.fail_cycle(cycle_id, message[:2000], time.time())

    return Job(("plan", cycle_id), None, "planner", "planner", _noop, work,
               lambda res: _commit_plan(orch, cycle_id, idx, res), fail,
               label=f"[cyan]cycle {idx}[/cyan] planner thinking")


def _commit_plan(orch: Host, cycle_id: int, idx: int, res: PlanResult) -> None:
    cfg = orch.cfg
    now = time.time()
    coders = [f"coder-{i + 1}" for i in range(cfg.coders)]
    plan = res.plan
    lines = []
    with orch.state.tx() as tx:
        for t in res.turns:
            orch.record_turn(tx, t, cycle_id=cycle_id)
        if plan is None:
            tx.fail_cycle(cycle_id, "no valid plan: " + "; ".join(res.problems)[:1500], now)
            tx.event("plan", f"cycle {idx}: no valid plan after {len(res.turns)} turn(s)", problems=res.problems)
            lines.append(f"[red]cycle {idx}: no valid plan[/red] ({esc('; '.join(res.problems)[:200])})")
        else:
            run = tx.run()
            base = runs.base_commit(orch.state)
            budget_left = None
            if cfg.budget.max_attempts is not None:
                budget_left = max(0, cfg.budget.max_attempts - tx.count_attempts())
            slot = 0
            for a in plan.assignments:
                d = tx.direction_named(a.direction)
                if d is None:
                    did, assisted = tx.add_direction(a.direction, "planner", a.hypothesis, now), 0
                else:
                    did, assisted = d["id"], int(bool(d["research_brief"]))
                assignment_id = tx.add_assignment(cycle_id, did, a.hypothesis, a.target_regime, dumps(a.edit_surface),
                                                  a.expected_evidence, a.instructions, assisted)
                n = min(len(coders), max(a.coders, cfg.attempts_per_assignment))
                for _ in range(n):
                    if budget_left is not None:
                        if budget_left <= 0:
                            break
                        budget_left -= 1
                    tx.add_attempt(assignment_id, cycle_id, coders[slot % len(coders)], base)
                    slot += 1
            tx.start_coding(cycle_id, plan.model_dump_json(), run["best_candidate"])
            tx.event("plan", f"cycle {idx}: {len(plan.assignments)} assignment(s)",
                     directions=[a.direction for a in plan.assignments])
            lines.append(f"[cyan]cycle {idx}[/cyan] plan: " + esc(", ".join(a.direction for a in plan.assignments)))
    for line in lines:
        orch.say(line)


def _blocked_directions(orch: Host) -> Dict[str, str]:
    why = {"research_requested": "is waiting for a research brief", "researching": "is being researched",
           "escalated": "failed after research; only the operator can reopen it", "closed": "was closed"}
    return {d["name"]: why[d["status"]] for d in orch.state.directions() if d["status"] in why}


# ---------------------------------------------------------------------------------- code
def _assignment(orch: Host, attempt) -> Dict[str, Any]:
    a = dict(orch.state.assignment(attempt["assignment_id"]))
    a["edit_surface"] = loads(a.pop("edit_surface_json"), [])
    a["attempt_id"] = attempt["id"]
    if not a["research_assisted"]:
        a["research_brief"] = None
    return a


def _quick_cmd(orch: Host) -> str:
    flags = " --device cpu --quick" if orch.cfg.device == "cpu" else ""
    return f"kernelwright eval solution{flags} --out .kernelwright/scratch/eval"


def _fail_attempt(orch: Host, attempt_id: int) -> Callable[[str], None]:
    def fail(message: str) -> None:
        with orch.state.tx() as tx:
            tx.fail_attempt(attempt_id, "internal_error", message[:2000], time.time())
    return fail


def code_job(orch: Host, attempt) -> Job:
    aid, agent, base = attempt["id"], attempt["agent"], attempt["base_commit"]
    asg = _assignment(orch, attempt)
    ctx = orch.common_context()
    text = prompts.assignment_md(asg, agent, _quick_cmd(orch))
    ctx["assignment.md"] = text
    ctx["assignment.json"] = json.dumps({k: asg[k] for k in ("direction", "hypothesis", "target_regime",
                                                             "edit_surface", "expected_evidence", "instructions",
                                                             "attempt_id", "cycle_idx")}, indent=1)
    surface = [g for g in asg["edit_surface"]]
    wt = orch.worktree(agent)
    evidence = orch.run_dir / "attempts" / f"a{aid}"
    session = orch.session(agent)
    meta = {"cycle": asg["cycle_idx"], "agent": agent, "attempt": aid,
            "assignment": {k: asg[k] for k in ("direction", "hypothesis", "target_regime", "edit_surface",
                                               "instructions")}}
    direction = _direction_label(asg["direction"])

    def claim() -> None:
        with orch.state.tx() as tx:
            tx.set_attempt_status(aid, "coding", started_at=time.time())

    def work(lease) -> CodeResult:
        worktrees.reset_worktree(wt, f"wt/{agent}", base)
        hashes = worktrees.write_context(wt, ctx)
        t = orch.turn(agent, wt, prompts.coder_prompt(text), meta, lease=lease, session_id=session)
        report = worktrees.inspect_changes(wt, base, orch.cfg.edit_surface, hashes)
        outside = [p for p in report.changed if not worktrees.matches(p, surface)]
        sha = None
        if t.result.ok and report.ok and not outside and report.changed:
            sha = worktrees.commit_surface(wt, base, report.changed, f"attempt a{aid} by {agent}")
            if sha:
                evidence.mkdir(parents=True, exist_ok=True)
                (evidence / "diff.patch").write_text(worktrees.diff_between(orch.repo, base, sha))
        return CodeResult(t, report, outside, sha)

    def commit(res: CodeResult) -> None:
        t, report = res.turn, res.report
        coder = roles.parse_coder(t.result.text)
        now = time.time()
        if not t.result.ok:
            status, outcome, detail = "failed", "agent_error", f"{t.result.error_kind}: {t.result.error}"
        elif not report.ok:
            status, outcome, detail = "failed", "surface_violation", report.summary()
        elif res.outside_assignment:
            status, outcome, detail = "failed", "surface_violation", \
                f"outside the assignment's surface {surface}: {res.outside_assignment[:6]}"
        elif not report.changed or res.sha is None:
            status, outcome, detail = "failed", "no_change", "the turn changed no kernel source"
        else:
            status, outcome, detail = "coded", None, None
        with orch.state.tx() as tx:
            orch.record_turn(tx, t, cycle_id=attempt["cycle_id"], attempt_id=aid)
            tx.record_coding(aid, status, outcome, detail, res.sha, dumps(report.changed + report.outside),
                             coder.model_dump_json(), str(evidence), now if status == "failed" else None)
            tx.event("attempt", f"a{aid} {agent}: {outcome or 'coded'}", detail=detail)
        color = "green" if status == "coded" else "red"
        orch.say(f"  a{aid} {agent} {direction}: [{color}]{outcome or 'coded'}[/{color}]"
                 + (f" - {esc(detail[:160])}" if detail else ""))

    return Job(("code", aid), "turn", agent, "coder", claim, work, commit, _fail_attempt(orch, aid),
               label=f"  a{aid} {agent} {direction} coding")


# ---------------------------------------------------------------------------------- check
def check_job(orch: Host, attempt) -> Job:
    aid, agent, sha = attempt["id"], attempt["agent"], attempt["commit_sha"]
    cfg = orch.cfg
    evidence = orch.run_dir / "attempts" / f"a{aid}"
    b = runs.best(orch.state)
    best_rows = (b or {}).get("final", {}).get("public", {}).get("workloads", [])
    base_cand = orch.state.cycle_base_candidate(attempt["cycle_id"])
    request = {"mode": "check", "definition": cfg.definition, "quick": cfg.quick, "device": cfg.device,
               "solution_dir": str(evidence / "solution"), "label": f"a{aid}", "gate": cfg.gate.model_dump(),
               "out": str(evidence / "check"),
               # the best is timed alongside, on the same inputs and device: the ratio does not depend
               # on how busy the machine was when the best's own numbers were taken
               "compare_dir": str(Path(b["evidence_dir"]) / "solution") if b else None,
               "compare_label": f"best-c{b['id']}" if b else None}

    def claim() -> None:
        with orch.state.tx() as tx:
            tx.set_attempt_status(aid, "checking")

    def work(lease) -> Dict[str, Any]:
        worktrees.export_solution(orch.repo, sha, evidence / "solution")
        return orch.evaluate(request, lease, evidence / "check", cfg.gate.timeout_s)

    def commit(verdict: Dict[str, Any]) -> None:
        now = time.time()
        pub = verdict.get("public", {})
        ratio = None
        if verdict.get("ok"):
            ratio = verdict.get("improvement") or geomean_ratio(best_rows, pub.get("workloads", []))
        with orch.state.tx() as tx:
            if not verdict.get("ok"):
                tx.record_check(aid, "failed", "gate:EVAL_ERROR", verdict.get("error", "")[:2000], dumps(verdict), now)
                color, msg = "red", f"check failed to run: {verdict.get('error', '')[:160]}"
            elif pub.get("all_passed"):
                tx.record_check(aid, "passed", "passed", None, dumps(verdict), now, keep_detail=True)
                tx.add_candidate("attempt", aid, attempt["cycle_id"], sha, dumps([base_cand] if base_cand else []),
                                 ratio, str(evidence), now)
                color, msg = "green", (f"check passed {pub['passed']}/{pub['total']}, mean "
                                       f"{pub['mean_latency_ms'] * 1e3:.1f} us"
                                       + (f", x{ratio:.2f} vs best" if ratio else ""))
            else:
                ff = pub.get("first_failure") or {}
                reason = ff.get("reason") or FAILED
                detail = f"{pub.get('trusted', 0)}/{pub.get('total', 0)} passed; {ff.get('uuid', '')[:12]}: " \
                         f"{ff.get('status', '')} {reason}: {(ff.get('log_tail') or '').strip()[-600:]}"
                tx.record_check(aid, "failed", f"gate:{reason}", detail, dumps(verdict), now)
                color, msg = "red", f"check failed: {reason} ({pub.get('trusted', 0)}/{pub.get('total', 0)} passed)"
            tx.event("check", f"a{aid}: {msg}")
        orch.say(f"  a{aid} [{color}]{esc(msg)}[/{color}]")

    return Job(("check", aid), "check", agent, "coder", claim, work, commit, _fail_attempt(orch, aid),
               label=f"  a{aid} gate check")


# ---------------------------------------------------------------------------------- synthesis
def synthesis_job(orch: Host, cycle) -> Job:
    cycle_id, idx = cycle["id"], cycle["idx"]
    atts = [runs.attempt_view(orch.state, a) for a in orch.state.cycle_attempts(cycle_id, "passed")]
    cands = {a["id"]: dict(orch.state.candidate_of_attempt(a["id"])) for a in atts}
    for a in atts:
        check = loads(a.get("check_json"), {})
        a["check_mean_ms"] = check.get("public", {}).get("mean_latency_ms")
        a["check_ratio"] = cands[a["id"]]["check_ratio"]
        a["report"] = roles.parse_coder(a.get("agent_report") or "").summary if a.get("agent_report") else ""
        try:
            a["report"] = json.loads(a["agent_report"]).get("summary", "")
        except (TypeError, ValueError, AttributeError):
            pass
    base = orch.state.cycle_base_commit(cycle_id)
    ctx = orch.common_context()
    for a in atts:
        ctx[f"attempts/a{a['id']}.patch"] = worktrees.diff_between(orch.repo, base, a["commit_sha"])
        ctx[f"attempts/a{a['id']}.json"] = json.dumps({k: a.get(k) for k in (
            "id", "agent", "direction", "hypothesis", "check_mean_ms", "check_ratio", "report")}, indent=1)
    prompt = prompts.synthesizer_prompt(idx, atts)
    passed_ids = [a["id"] for a in atts]
    wt = orch.worktree("synthesizer")
    evidence = orch.run_dir / "cycles" / f"k{idx}-synthesis"
    blocked = orch.turn_block("synthesis")
    meta = {"cycle": idx, "attempts": [{k: a.get(k) for k in ("id", "agent", "direction", "check_mean_ms",
                                                              "check_ratio")} for a in atts]}

    def work(lease) -> SynthesisResult:
        if blocked:
            return SynthesisResult(None, None, None, None, blocked)
        worktrees.reset_worktree(wt, "wt/synthesizer", base)
        hashes = worktrees.write_context(wt, ctx)
        t = orch.turn("synthesizer", wt, prompt, meta, session_id=orch.session("synthesizer"))
        decision, sha, problem = None, None, None
        if t.result.ok:
            try:
                decision = roles.parse_synthesis(t.result.text, passed_ids)
            except roles.ReplyError as exc:
                problem = str(exc)
        else:
            problem = f"turn failed: {t.result.error}"
        if decision is not None and decision.decision == "merge":
            report = worktrees.inspect_changes(wt, base, orch.cfg.edit_surface, hashes)
            if not report.ok:
                problem, decision = f"merge rejected: {report.summary()}", None
            elif report.changed:
                sha = worktrees.commit_surface(wt, base, report.changed, f"cycle {idx} synthesis")
                if sha:
                    worktrees.export_solution(orch.repo, sha, evidence / "solution")
                    (evidence / "diff.patch").write_text(worktrees.diff_between(orch.repo, base, sha))
            if sha is None and problem is None:
                problem, decision = "merge produced no change", None
        return SynthesisResult(t, decision, sha, problem, None)

    def commit(res: SynthesisResult) -> None:
        decision = res.decision
        now = time.time()
        merged = None
        with orch.state.tx() as tx:
            if res.turn is not None:
                orch.record_turn(tx, res.turn, cycle_id=cycle_id)
            record = {"decision": decision.model_dump() if decision else None, "problem": res.problem,
                      "mechanical": decision is None, "budget": res.blocked}
            tx.set_synthesis(cycle_id, dumps(record))
            if res.sha is not None and decision is not None:
                parents = [cands[a]["id"] for a in decision.attempts]
                merged_id = tx.add_candidate("synthesis", None, cycle_id, res.sha, dumps(parents), None,
                                             str(evidence), now)
                merged = dict(tx.candidate(merged_id))
            outcome = (f"{decision.decision} {decision.attempt or decision.attempts}" if decision
                       else f"mechanical selection ({res.problem or res.blocked})")
            tx.event("synthesis", f"cycle {idx}: {outcome}")
        orch.say("  synthesizer: " + esc(outcome))
        orch.queue_finals(cycle_id, list(cands.values()), merged,
                          decision.model_dump() if decision is not None else None)

    def fail(message: str) -> None:
        with orch.state.tx() as tx:
            tx.set_synthesis(cycle_id, dumps({"error": message[:2000]}))

    return Job(("synth", cycle_id), None, "synthesizer", "synthesizer", _noop, work, commit, fail,
               label=f"  synthesizer comparing {len(atts)} passing attempts")


# ---------------------------------------------------------------------------------- final (gate)
def final_job(orch: Host, cand: Dict[str, Any]) -> Job:
    cid = cand["id"]
    cfg = orch.cfg
    evidence = Path(cand["evidence_dir"])
    b = runs.best(orch.state)
    compare = b if (b is not None and b["id"] != cid) else None
    request = {"mode": "final", "definition": cfg.definition, "quick": cfg.quick, "device": cfg.device,
               "solution_dir": str(evidence / "solution"), "label": f"c{cid}",
               "compare_dir": str(Path(compare["evidence_dir"]) / "solution") if compare else None,
               "compare_label": f"best-c{compare['id']}" if compare else None,
               "baselines": bool(cfg.baselines and cand["origin"] == "start"),
               "gate": cfg.gate.model_dump(), "out": str(evidence / f"final-c{cid}")}
    compared_to = compare["id"] if compare else None

    def claim() -> None:
        with orch.state.tx() as tx:
            tx.set_candidate_status(cid, "evaluating")

    def work(lease) -> Dict[str, Any]:
        if not (evidence / "solution").is_dir():
            worktrees.export_solution(orch.repo, cand["commit_sha"], evidence / "solution")
        return orch.evaluate(request, lease, evidence / "final", cfg.gate.timeout_s)

    def fail(message: str) -> None:
        with orch.state.tx() as tx:
            tx.decide_candidate(cid, "rejected", f"evaluation error: {message[:500]}", time.time())

    label = "baseline: gate final evaluation of the starting solution" if cand["origin"] == "start" else \
        f"  c{cid} gate final evaluation (public + hidden, best re-timed alongside)"
    return Job(("final", cid), "official", f"final-c{cid}", "gate", claim, work,
               lambda verdict: _commit_final(orch, cand, verdict, compared_to), fail, label=label)


def _final_decision(orch: Host, cand: Dict[str, Any], verdict: Dict[str, Any],
                    best_id: Optional[int]) -> Tuple[str, Optional[str]]:
    """(status, reason) of a final evaluation: promoted, not_better or rejected."""
    pub = verdict.get("public", {})
    hidden = verdict.get("hidden", {})
    improvement = verdict.get("improvement")
    if not verdict.get("ok"):
        return "rejected", f"evaluation error: {verdict.get('error', '')[:400]}"
    if not pub.get("all_passed"):
        ff = pub.get("first_failure") or {}
        return "rejected", f"public split: {ff.get('reason', FAILED)} on {ff.get('uuid', '')[:12]}"
    if not verdict.get("final_passed"):
        return "rejected", (f"hidden split: {hidden.get('passed', 0)}/{hidden.get('total', 0)} passed "
                            f"({', '.join(hidden.get('reasons', [])) or HIDDEN_SPLIT_FAILED})")
    if cand["origin"] == "start" or best_id is None:
        return "promoted", "baseline" if cand["origin"] == "start" else "first passing candidate"
    if improvement is None:
        if not verdict.get("compare", {}).get("all_passed"):
            return "promoted", "the current best failed when re-timed alongside"
        return "rejected", "no common workloads to compare"
    if improvement >= 1.0 + orch.cfg.min_improvement:
        return "promoted", f"x{improvement:.3f} over c{best_id}"
    return "not_better", f"x{improvement:.3f} over c{best_id} (needs >= x{1 + orch.cfg.min_improvement:.3f})"


def _commit_final(orch: Host, cand: Dict[str, Any], verdict: Dict[str, Any],
                  compared_to: Optional[int]) -> None:
    cid = cand["id"]
    now = time.time()
    with orch.state.tx() as tx:
        run = tx.run()
        best_id = run["best_candidate"]
        if cand["origin"] != "start" and best_id != compared_to:
            tx.set_candidate_status(cid, "pending_final")
            tx.event("final", f"c{cid}: the best changed during its evaluation; evaluating again")
            return
        pub = verdict.get("public", {})
        improvement = verdict.get("improvement")
        status, reason = _final_decision(orch, cand, verdict, best_id)
        tx.record_final(cid, status, reason, dumps(verdict), pub.get("speedup"), pub.get("mean_latency_ms"),
                        improvement, now)
        if status == "promoted":
            totals = orch.state.totals()
            tx.set_best(cid)
            tx.add_promotion(cid, best_id, now, run["active_s"], totals["tokens"], totals["cost_usd"],
                             pub.get("speedup"), pub.get("mean_latency_ms"), improvement)
            if cand.get("cycle_id"):
                tx.skip_pending_finals(cand["cycle_id"], "a sibling was promoted", now)
            if orch.cfg.profile:
                tx.add_profile(cid, now)
        tx.event("final", f"c{cid}: {status} ({reason})")
    if status == "promoted":
        worktrees.set_branch(orch.repo, "best", cand["commit_sha"])
    color = {"promoted": "bold green", "not_better": "yellow"}.get(status, "red")
    orch.say(f"  c{cid} gate: [{color}]{status.upper()}[/{color}] {esc(reason or '')}")


# ---------------------------------------------------------------------------------- profile
def profile_job(orch: Host, prof) -> Job:
    pid, cid = prof["id"], prof["candidate_id"]
    cand = runs.candidate(orch.state, cid)
    evidence = Path(cand["evidence_dir"])
    base_def = orch.builtin.base_name

    def claim() -> None:
        with orch.state.tx() as tx:
            tx.set_profile_status(pid, "running")

    def work(lease) -> ProfileResult:
        from kernelwright.workflow.profiler import run_profile

        tool, text = run_profile(evidence / "solution", base_def, orch.cfg.quick, lease, evidence / "profile",
                                 orch.cfg.gate.timeout_s)
        return ProfileResult(tool, text)

    def commit(res: ProfileResult) -> None:
        with orch.state.tx() as tx:
            tx.finish_profile(pid, "done" if res.tool != "none" else "failed", res.tool, res.text,
                              str(evidence / "profile"), time.time())
            tx.event("profile", f"c{cid} profiled ({res.tool})")
        orch.say(f"  profiler: c{cid} ({res.tool})")

    def fail(message: str) -> None:
        with orch.state.tx() as tx:
            tx.fail_profile(pid, message[:2000])

    return Job(("profile", pid), "profile", f"profile-c{cid}", "profiler", claim, work, commit, fail,
               label=f"  profiler on c{cid}")


# ---------------------------------------------------------------------------------- research
def research_job(orch: Host, d) -> Job:
    did = d["id"]
    direction = dict(d)
    failures = [runs.attempt_view(orch.state, a) for a in orch.state.direction_attempts(did)]
    ctx = orch.common_context()
    prompt = prompts.researcher_prompt(direction, failures)
    wt = orch.worktree("researcher")
    base = runs.base_commit(orch.state)
    meta = {"direction": direction["name"], "failures": [f["result"] for f in failures]}
    label = _direction_label(direction["name"])

    def claim() -> None:
        with orch.state.tx() as tx:
            tx.set_direction_status(did, "researching")

    def work(lease) -> ResearchResult:
        worktrees.reset_worktree(wt, "wt/researcher", base)
        worktrees.write_context(wt, ctx)
        t = orch.turn("researcher", wt, prompt, meta, session_id=orch.session("researcher"))
        brief = None
        if t.result.ok:
            try:
                brief = roles.parse_research(t.result.text)
            except roles.ReplyError:
                brief = None
        return ResearchResult(t, brief)

    def commit(res: ResearchResult) -> None:
        brief = res.brief
        if brief is not None:
            text = brief.brief + ("\n\n" + "\n".join(f"- {i.idea} ({i.provenance}{': ' + i.reference if i.reference else ''})"
                                                     for i in brief.ideas) if brief.ideas else "")
        else:
            text = f"(the researcher produced no brief: {res.turn.result.error or 'unparseable reply'})"
        with orch.state.tx() as tx:
            orch.record_turn(tx, res.turn, direction_id=did)
            tx.open_direction(did, text[:8000])
            tx.event("research", f"brief for {direction['name']}")
        orch.say(f"  researcher: brief for {label}")

    def fail(message: str) -> None:
        with orch.state.tx() as tx:
            tx.open_direction(did, f"(research failed: {message[:300]})")

    return Job(("research", did), None, "researcher", "researcher", claim, work, commit, fail,
               label=f"  researcher on stalled direction {label}")
