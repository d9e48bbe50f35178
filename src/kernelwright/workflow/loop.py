"""The orchestrator: a deterministic state machine over the run's SQLite state.

Each pass of the loop (one *tick*) applies the operator's controls, advances bookkeeping
(cycle transitions, stall policy), and starts every step that is ready and has its device.
A *step* performs at most one agent turn or one evaluation; it is claimed in one transaction
(its row moves to a running status), runs in a worker thread without touching the state, and
its results are written in one transaction by the main thread.  A run killed at any point
resumes (:meth:`State.recover`) by putting claimed-but-unfinished steps back in the queue;
finished steps are never repeated.  The steps themselves are built in ``workflow/jobs.py``.

Roles and the order of a cycle::

    Planner turn (JSON plan, validated, bounded retries)
      -> one attempt per coder and assignment: coder turn in its own worktree, diff against the
         allowed edit surface, commit of the surface files only
      -> orchestrator's check of each attempt (gate, public workloads)
      -> Synthesizer turn when two or more attempts passed (select or merge)
      -> final evaluation(s) by the gate (public + hidden split, current best re-timed alongside)
         -> promotion decided in code; profile of the new best (Profiler tool)
      -> stall policy: 3 failed attempts in a direction -> Researcher brief; failed
         research-assisted attempts -> the run waits for the operator.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
import traceback
from concurrent import futures
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from kernelwright.workflow import jobs, prompts, runs, worktrees
from kernelwright.workflow.config import CLAUDE_TOOLS, ROLE_KEYS, RunConfig, role_of
from kernelwright.workflow.evaljob import run_evaluation
from kernelwright.workflow.jobs import Job, TurnOutcome, esc
from kernelwright.workflow.leases import Lease, LeasePool, LocalLeasePool
from kernelwright.workflow.state import State

TERMINAL_ATTEMPT = ("passed", "failed")
EXIT_FINISHED, EXIT_WAITING, EXIT_STOPPED, EXIT_INTERRUPTED = 0, 3, 0, 130


class OrchestratorError(Exception):
    """The run cannot start (an agent backend is unavailable, the state is inconsistent)."""


class Orchestrator:
    """Drive one run folder until it finishes, waits for the operator, or is stopped.

    ``backends`` (agent name -> AgentBackend), ``pool`` and ``evaluator`` replace the ones built
    from the run config (tests, an external evaluation pool).  ``log`` receives one line per event.
    Raises OrchestratorError when an agent backend is unavailable at start.
    """

    def __init__(self, run_dir: Path, backends: Optional[Dict[str, Any]] = None, pool: Optional[LeasePool] = None,
                 log: Callable[[str], None] = print, check_agents: bool = True,
                 evaluator: Optional[Callable[..., Dict[str, Any]]] = None):
        self.run_dir = Path(run_dir).resolve()
        self.state = State(self.run_dir)
        self.cfg = RunConfig.model_validate(self.state.config())
        self.builtin = runs.builtin_of(self.cfg)
        self.log = log
        self.pool: LeasePool = pool or LocalLeasePool(self.cfg.device_names(), self.cfg.quiet, self.cfg.turn_share)
        self.backends = backends if backends is not None else build_backends(self.cfg, self.run_dir)
        self.check_agents = check_agents
        #: (request, lease, job_dir, timeout_s) -> verdict; the gate in a subprocess unless replaced
        self.evaluate = evaluator or run_evaluation
        self.repo = self.run_dir / "repo"
        self.inflight: Dict[futures.Future, Tuple[Job, Optional[Lease]]] = {}
        self.executor: Optional[futures.ThreadPoolExecutor] = None
        self._last_clock = time.time()
        self._last_leases: Optional[str] = None
        self._lock = threading.Lock()

    def say(self, msg: str) -> None:
        try:
            self.log(msg)
        except Exception:  # pragma: no cover - printing must never stop a run
            pass

    # ================================================================== setup
    def worktree(self, agent: str) -> Path:
        return self.run_dir / "worktrees" / agent

    def _begin(self) -> None:
        run = self.state.run()
        if run["pid"] and run["pid"] != os.getpid() and runs.orchestrator_alive(self.state):
            raise OrchestratorError(f"run {run['id']} is already driven by process {run['pid']} "
                                    f"(stop it with kernelwright run stop {self.run_dir})")
        if self.check_agents:
            check_backends(self.backends)
        for line in self.state.recover():
            self.say(f"[yellow]resume[/yellow] {esc(line)}")
        start = runs.start_candidate(self.state)
        for agent in self.cfg.agent_names():
            worktrees.ensure_worktree(self.repo, self.worktree(agent), f"wt/{agent}", start["commit_sha"])
        b = runs.best(self.state)
        if b is not None:
            worktrees.set_branch(self.repo, "best", b["commit_sha"])
        with self.state.tx() as tx:
            run = tx.run()
            status = "waiting_operator" if run["status"] == "waiting_operator" else "running"
            control = "active" if run["control"] == "stopped" else run["control"]
            tx.start_session(status, control, os.getpid(), time.time())
            tx.event("session", f"orchestrator started (pid {os.getpid()})")
        self._last_clock = time.time()

    # ================================================================== main loop
    def run(self) -> int:
        """Run until done.  Returns the exit code: 0 finished or stopped, 3 waiting for the
        operator or paused with nothing in flight (with ``wait_for_operator = false``), 130
        interrupted.  A paused run otherwise waits for ``kernelwright run resume``."""
        self._begin()
        workers = len(self.cfg.agent_names()) + len(self.pool.devices()) + 2
        self.executor = futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kw-step")
        try:
            while True:
                self._clock()
                self._harvest(0)
                run = self.state.run()
                if run["control"] == "stopped":
                    if not self.inflight:
                        return self._end("stopped", "operator stop", EXIT_STOPPED)
                elif run["control"] == "paused":
                    if run["status"] != "paused":
                        self._set_status("paused")
                        self.say(f"paused: kernelwright run resume {self.run_dir} continues it")
                    if not self.inflight and not self.cfg.wait_for_operator:
                        return self._end("paused", "paused by the operator", EXIT_WAITING)
                else:
                    if run["status"] == "paused":
                        self._set_status("running")
                    block = self._wall_block()
                    if block is None:
                        self._bookkeeping()
                        for job in self._ready():
                            self._start(job)
                    if not self.inflight:
                        run = self.state.run()
                        if run["status"] == "waiting_operator":
                            if not self.cfg.wait_for_operator:
                                return self._end("waiting_operator", "waiting for the operator", EXIT_WAITING,
                                                 keep_status=True)
                        elif block is not None or not self._has_work():
                            return self._end("finished", block or self._finish_reason(), EXIT_FINISHED)
                self._sync_leases()
                self._harvest(self.cfg.poll_s)
        except KeyboardInterrupt:
            self._interrupt()
            return EXIT_INTERRUPTED
        finally:
            if self.executor is not None:
                self.executor.shutdown(wait=False, cancel_futures=True)

    def _has_work(self) -> bool:
        return bool(self._ready(dry=True))

    def _finish_reason(self) -> str:
        return self.turn_block("plan") or "nothing left to do"

    def _end(self, status: str, reason: Optional[str], code: int, keep_status: bool = False) -> int:
        with self.state.tx() as tx:
            tx.end_session(status, reason)
            tx.event("end", f"orchestrator exits: {status}" + (f" ({reason})" if reason else ""))
        self.say(f"[bold]run {status}[/bold]" + (f": {esc(reason)}" if reason else ""))
        return code

    def _interrupt(self) -> None:
        try:
            with self.state.tx() as tx:
                tx.end_session("interrupted", "interrupted (Ctrl-C)", clear_leases=False)
                tx.event("end", "orchestrator interrupted; resume with kernelwright optimize --resume")
        except Exception:  # pragma: no cover
            pass
        self.say("[yellow]interrupted[/yellow]: finished steps are saved; resume with "
                 f"kernelwright optimize --resume {self.run_dir}")

    def _set_status(self, status: str) -> None:
        with self.state.tx() as tx:
            tx.set_run_status(status)
            tx.event("status", f"run {status}")

    def _clock(self) -> None:
        now = time.time()
        if now - self._last_clock < 1.0:
            return
        with self.state.tx() as tx:
            tx.add_active_time(now - self._last_clock, now)
        self._last_clock = now

    def _sync_leases(self) -> None:
        snap = self.pool.snapshot()
        key = json.dumps(sorted((s["holder"], s["kind"], s["device"] or "") for s in snap))
        if key == self._last_leases:
            return
        with self.state.tx() as tx:
            tx.replace_live_leases(snap)
        self._last_leases = key

    # ================================================================== steps
    def inflight_keys(self) -> set:
        return {job.key for job, _ in self.inflight.values()}

    def _start(self, job: Job) -> bool:
        if job.key in self.inflight_keys():
            return False
        lease = None
        if job.lease_kind:
            lease = self.pool.try_acquire(job.lease_kind, job.holder, job.role)
            if lease is None:
                return False
        try:
            job.claim()
        except Exception:
            if lease is not None:
                self.pool.release(lease)
            raise
        fut = self.executor.submit(job.work, lease)
        self.inflight[fut] = (job, lease)
        if job.label:
            self.say(job.label + (f" on {lease.device}" if lease else ""))
        return True

    def _harvest(self, timeout: float) -> None:
        if not self.inflight:
            if timeout:
                time.sleep(timeout)
            return
        done, _ = futures.wait(list(self.inflight), timeout=timeout, return_when=futures.FIRST_COMPLETED)
        for fut in done:
            job, lease = self.inflight.pop(fut)
            held = self.pool.release(lease) if lease is not None else 0.0
            if lease is not None:
                with self.state.tx() as tx:
                    tx.add_device_usage(lease.device, lease.kind, job.holder, job.role, held, lease.since)
            exc = fut.exception()
            if exc is not None:
                self._step_failed(job, exc, f"step {job.key} failed inside the orchestrator",
                                  f"[red]step {job.key} failed: {esc(repr(exc))}[/red]")
                continue
            try:
                job.commit(fut.result())
            except Exception as exc:  # a bug in a commit must not lose the run: record it, fail the step
                self._step_failed(job, exc, f"recording step {job.key} failed",
                                  f"[red]recording step {job.key} failed: {esc(repr(exc))}[/red]")

    def _step_failed(self, job: Job, exc: BaseException, what: str, line: str) -> None:
        tb = "".join(traceback.format_exception(exc))[-3000:]
        self.state.add_event("error", f"{what}: {exc!r}", traceback=tb)
        self.say(line)
        job.fail(f"{type(exc).__name__}: {exc}")

    # ================================================================== budgets
    def _wall_block(self) -> Optional[str]:
        b = self.cfg.budget
        if b.max_wall_s is not None and self.state.run()["active_s"] >= b.max_wall_s:
            return f"budget: wall time {b.max_wall_s:.0f} s used"
        return None

    def turn_block(self, kind: str) -> Optional[str]:
        """Why a new agent turn of ``kind`` may not start now (None: it may)."""
        b = self.cfg.budget
        t = self.state.totals()
        if b.max_tokens is not None and t["tokens"] >= b.max_tokens:
            return f"budget: {t['tokens']} tokens used of {b.max_tokens}"
        if b.max_cost_usd is not None and t["cost_usd"] >= b.max_cost_usd:
            return f"budget: ${t['cost_usd']:.2f} spent of ${b.max_cost_usd:.2f}"
        wall = self._wall_block()
        if wall:
            return wall
        if kind == "plan":
            if b.max_cycles is not None and t["cycles"] >= b.max_cycles:
                return f"budget: {t['cycles']} cycles of {b.max_cycles}"
            if b.max_attempts is not None and t["attempts"] >= b.max_attempts:
                return f"budget: {t['attempts']} attempts of {b.max_attempts}"
        if kind == "code" and b.max_attempts is not None:
            started = self.state.started_attempts()
            if started >= b.max_attempts:
                return f"budget: {started} attempts of {b.max_attempts}"
        return None

    def _turn_timeout(self, agent: str) -> float:
        timeout = float(self.backends[agent].config.timeout_s)
        b = self.cfg.budget
        if b.max_wall_s is not None:
            timeout = max(30.0, min(timeout, b.max_wall_s - self.state.run()["active_s"]))
        return timeout

    # ================================================================== bookkeeping
    def _bookkeeping(self) -> None:
        keys = self.inflight_keys()
        for c in self.state.cycles("coding"):
            atts = self.state.cycle_attempts(c["id"])
            pending = [a for a in atts if a["status"] == "pending"]
            if pending and self.turn_block("code"):
                why = self.turn_block("code")
                with self.state.tx() as tx:
                    for a in pending:
                        tx.fail_attempt(a["id"], "budget", why, time.time(), only_pending=True)
                continue
            if any(a["status"] not in TERMINAL_ATTEMPT for a in atts) or any(k[0] in ("code", "check") and k[1] in
                                                                            [a["id"] for a in atts] for k in keys):
                continue
            passed = [a for a in atts if a["status"] == "passed"]
            if len(passed) >= 2:
                with self.state.tx() as tx:
                    tx.set_cycle_status(c["id"], "synthesis", only_from="coding")
            else:
                self.queue_finals(c["id"], [dict(self.state.candidate_of_attempt(a["id"])) for a in passed],
                                  None, None)
        for c in self.state.cycles("final"):
            if not self.state.open_finals(c["id"]) and ("final", None) not in keys:
                self._close_cycle(c["id"])

    def queue_finals(self, cycle_id: int, ordered: List[Dict[str, Any]], merged: Optional[Dict[str, Any]],
                     decision: Optional[Dict[str, Any]]) -> None:
        """Order the cycle's candidates for the gate: the synthesizer's merge or pick first, then
        the rest by check ratio; drop those whose check shows no gain; at most N go to the gate."""
        rest = sorted(ordered, key=lambda c: -(c.get("check_ratio") or 0.0))
        if decision and decision.get("decision") == "select":
            pick = [c for c in rest if c.get("attempt_id") == decision.get("attempt")]
            rest = pick + [c for c in rest if c not in pick]
        queue, dropped = [], []
        for c in rest:
            ratio = c.get("check_ratio")
            if ratio is not None and ratio < self.cfg.final_min_check_ratio:
                dropped.append((c, f"check ratio {ratio:.3f} below {self.cfg.final_min_check_ratio:g}: not faster"))
            else:
                queue.append(c)
        if merged is not None:
            queue.insert(0, merged)
        skipped = queue[self.cfg.max_finals_per_cycle:]
        queue = queue[: self.cfg.max_finals_per_cycle]
        now = time.time()
        with self.state.tx() as tx:
            for rank, c in enumerate(queue):
                tx.queue_final(c["id"], rank)
            for c, why in dropped:
                tx.decide_candidate(c["id"], "not_better", why, now)
            for c in skipped:
                tx.decide_candidate(c["id"], "skipped", "over the per-cycle final limit", now)
            tx.set_cycle_status(cycle_id, "final")
        if not queue:
            self._close_cycle(cycle_id)

    def _close_cycle(self, cycle_id: int) -> None:
        """The cycle is over: update each direction's failure counts and apply the stall policy."""
        cfg = self.cfg
        with self.state.tx() as tx:
            cyc = tx.cycle(cycle_id)
            if cyc["status"] in ("done", "failed"):
                return
            promoted_cands, promoted_parents = tx.promoted_in_cycle(cycle_id)
            by_dir: Dict[int, List[Tuple[bool, bool]]] = {}
            for a in tx.cycle_attempt_outcomes(cycle_id):
                if a["outcome"] in ("budget", "agent_error", "internal_error"):
                    continue
                cand = tx.candidate_id_of_attempt(a["id"])
                ok = cand is not None and (cand in promoted_cands or cand in promoted_parents)
                by_dir.setdefault(a["direction_id"], []).append((ok, bool(a["research_assisted"])))
            escalated = []
            for did, results in by_dir.items():
                d = tx.direction(did)
                if any(ok for ok, _ in results):
                    tx.direction_succeeded(did)
                    continue
                plain = sum(1 for ok, ra in results if not ra)
                assisted = sum(1 for ok, ra in results if ra)
                failed, rfailed = d["failed_attempts"] + plain, d["research_failed_attempts"] + assisted
                status = d["status"]
                if d["research_requested"] and rfailed >= cfg.research_attempts and status == "open":
                    status = "escalated"
                    escalated.append(d["name"])
                elif not d["research_requested"] and failed >= cfg.stall_attempts and status == "open":
                    status = "research_requested"
                    tx.event("stall", f"direction {d['name']}: {failed} failed attempts; asking the Researcher")
                tx.direction_failed(did, failed, rfailed, status)
            tx.finish_cycle(cycle_id, time.time())
            tx.event("cycle", f"cycle {cyc['idx']} done")
            if escalated:
                msg = (f"direction(s) {', '.join(escalated)} failed after research: waiting for the operator "
                       f"(kernelwright run redirect|resume {self.run_dir.name})")
                tx.wait_for_operator(msg, directions=escalated)
                tx.add_note("orchestrator", msg, time.time())
        if escalated:
            self.say(f"[bold yellow]{esc(msg)}[/bold yellow]")
        self.say(f"[dim]cycle {cyc['idx']} done[/dim]")

    # ================================================================== what is ready
    def _ready(self, dry: bool = False) -> List[Job]:
        """Steps that may start now, in priority order.  With ``dry`` nothing is written."""
        ready: List[Job] = []
        keys = self.inflight_keys()
        start = runs.start_candidate(self.state)
        if start["status"] in ("pending_final", "evaluating"):
            if start["status"] == "pending_final":
                ready.append(jobs.final_job(self, start))
            return ready
        for c in self.state.cycles("final"):
            if any(k[0] == "final" for k in keys):
                break
            cand = self.state.next_final(c["id"])
            if cand is not None:
                ready.append(jobs.final_job(self, runs.candidate(self.state, cand["id"])))
        for a in self.state.attempts("coded"):
            ready.append(jobs.check_job(self, a))
        busy = {self.state.attempt_agent(k[1]) for k in keys if k[0] == "code"}
        for a in self.state.attempts("pending"):
            if a["agent"] in busy or self.turn_block("code"):
                continue
            busy.add(a["agent"])
            ready.append(jobs.code_job(self, a))
        for c in self.state.cycles("synthesis"):
            if ("synth", c["id"]) not in keys:
                ready.append(jobs.synthesis_job(self, c))
        for p in self.state.profiles("pending"):
            ready.append(jobs.profile_job(self, p))
        research_pending = False
        for d in self.state.directions("research_requested", "researching"):
            research_pending = True
            if d["status"] == "research_requested" and not self.turn_block("research"):
                ready.append(jobs.research_job(self, d))
        open_cycle = self.state.open_cycle()
        if open_cycle is not None:
            if open_cycle["status"] == "planning" and ("plan", open_cycle["id"]) not in keys:
                ready.append(jobs.plan_job(self, open_cycle))
            return ready
        run = self.state.run()
        if run["status"] == "waiting_operator" or research_pending or self.state.profiles_in_progress() \
                or any(k[0] == "final" for k in keys):
            return ready
        if self.state.failed_cycles_in_a_row() >= self.cfg.max_planner_failures:
            if not dry:
                with self.state.tx() as tx:
                    tx.wait_for_operator(f"{self.cfg.max_planner_failures} planning cycles failed in a row: "
                                         "waiting for the operator")
            return ready
        if self.state.agent_errors_in_a_row() >= 3:
            if not dry:
                with self.state.tx() as tx:
                    tx.wait_for_operator("3 coder turns in a row failed on the agent side: waiting for the "
                                         "operator (check the agents' logs and credentials)")
            return ready
        if self.turn_block("plan"):
            return ready
        if dry:
            return ready + [None]  # type: ignore[list-item]
        idx = self.state.next_cycle_idx()
        with self.state.tx() as tx:
            cycle_id = tx.add_cycle(idx, run["best_candidate"], time.time())
            tx.event("cycle", f"cycle {idx} planning")
        ready.append(jobs.plan_job(self, self.state.cycle(cycle_id)))
        return ready

    # ================================================================== agent turns
    def turn(self, agent: str, workspace: Path, prompt: str, metadata: Dict[str, Any],
             lease: Optional[Lease] = None, session_id: Optional[str] = None) -> TurnOutcome:
        """One turn of ``agent`` in ``workspace`` (runs in a worker thread; touches no state)."""
        from kernelwright.agents import TurnRequest

        role = role_of(agent)
        backend = self.backends[agent]
        settings = self.cfg.agent_settings(agent) if self.cfg.agents else {}
        tools = settings.get("allowed_tools")
        if tools is None and backend.config.backend == "claude-code":
            tools = CLAUDE_TOOLS.get(role)
        env = {"KERNELWRIGHT_HIDDEN_SALT": ""}
        if lease is not None and lease.device_type == "cuda":
            env["CUDA_VISIBLE_DEVICES"] = str(lease.index)
        elif self.cfg.device == "cpu":
            env["TRITON_INTERPRET"] = "1"
            env["CUDA_VISIBLE_DEVICES"] = ""
        flags = ["--device", "cpu", "--quick"] if self.cfg.device == "cpu" else []
        base_def = self.builtin.base_name
        req = TurnRequest(
            workspace=workspace, prompt=prompt, system_prompt=prompts.role_prompt(role), session_id=session_id,
            allowed_tools=tools, timeout_s=self._turn_timeout(agent), role=role, env=env, metadata=metadata,
            gate_argv=[sys.executable, "-m", "kernelwright", "eval", "{workspace}/solution", *flags, "--out",
                       "{workspace}/.kernelwright/scratch/eval"],
            profiler_argv=[sys.executable, "-m", "kernelwright.workflow.profiler", "{workspace}/solution", "-d",
                           base_def] + (["--quick", "--device", "cpu"] if self.cfg.device == "cpu" else []))
        started = time.time()
        result = backend.run_turn(req)
        return TurnOutcome(agent, role, result, started)

    def record_turn(self, tx, t: TurnOutcome, cycle_id=None, attempt_id=None, direction_id=None) -> None:
        r = t.result
        u = r.usage
        backend = self.backends[t.agent]
        tx.add_turn(t.role, t.agent, backend.config.backend, backend.config.model, cycle_id, attempt_id, direction_id,
                    r.ok, r.error, r.session_id, u.input_tokens, u.output_tokens, u.cache_read_tokens,
                    u.cache_write_tokens, float(u.cost_usd or 0.0), r.duration_s, t.started_at, (r.text or "")[:20000])

    def session(self, agent: str) -> Optional[str]:
        """The session to resume for ``agent`` (None: a fresh one)."""
        settings = self.cfg.agent_settings(agent) if self.cfg.agents else {}
        if not settings.get("resume_session"):
            return None
        return self.state.agent_session(agent)

    def common_context(self) -> Dict[str, str]:
        """The context files every turn gets."""
        b = runs.best(self.state)
        prof = runs.latest_profile(self.state, b["id"] if b else None)
        return {"best.md": prompts.best_md(b, runs.start_candidate(self.state)),
                "profile.md": prof or "# Profile\n\nNo profile of the current best yet.\n",
                "history.md": prompts.history_md(runs.cycles_view(self.state)),
                "directions.md": prompts.directions_md(runs.directions_view(self.state)),
                "operator.md": prompts.operator_md(runs.notes_view(self.state))}


def build_backends(cfg: RunConfig, run_dir: Optional[Path] = None) -> Dict[str, Any]:
    """One agent backend per agent of the run (agent name -> AgentBackend).  A scripted agent whose
    ``options.script`` is ``"module:function"`` replays that callable.  Raises AgentConfigError,
    OrchestratorError."""
    from kernelwright.agents import AgentConfig, ScriptedBackend, make_backend

    out = {}
    for name in cfg.agent_names():
        settings = {k: v for k, v in cfg.agent_settings(name).items() if k not in ROLE_KEYS}
        if run_dir is not None:
            settings.setdefault("log_dir", str(Path(run_dir) / "agents" / "logs" / name))
            settings.setdefault("state_dir", str(Path(run_dir) / "agents" / "state" / name))
        script = (settings.get("options") or {}).get("script")
        if settings["backend"] == "scripted" and isinstance(script, str) and ":" in script \
                and not script.endswith(".json"):
            out[name] = ScriptedBackend(_import_callable(script), AgentConfig.parse(settings))
        else:
            out[name] = make_backend(settings)
    return out


def check_backends(backends: Dict[str, Any]) -> None:
    """Call every backend's ``check()``; raises OrchestratorError naming the first unusable agent."""
    from kernelwright.agents import AgentUnavailable

    seen = {}
    for name, backend in backends.items():
        key = (backend.config.backend, backend.config.binary, tuple(backend.config.credential_env),
               tuple(sorted(backend.config.env.items())), backend.config.base_url)
        if key in seen:
            continue
        try:
            backend.check()
        except AgentUnavailable as exc:
            raise OrchestratorError(f"agent {name} unavailable: {exc}") from None
        seen[key] = name


def _import_callable(spec: str):
    import importlib

    module, _, attr = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError) as exc:
        raise OrchestratorError(f"cannot load scripted agent {spec!r}: {exc}") from None
    if not callable(fn):
        raise OrchestratorError(f"scripted agent {spec!r} is not callable")
    return fn
