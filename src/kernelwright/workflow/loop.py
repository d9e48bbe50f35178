"""The orchestrator: a deterministic state machine over the run's SQLite state.

Each pass of the loop (one *tick*) applies the operator's controls, advances bookkeeping
(cycle transitions, stall policy), and starts every step that is ready and has its device.
A *step* performs at most one agent turn or one evaluation; it is claimed in one transaction
(its row moves to a running status), runs in a worker thread without touching the state, and
its results are written in one transaction by the main thread.  A run killed at any point
resumes (:meth:`State.recover`) by putting claimed-but-unfinished steps back in the queue;
finished steps are never repeated.

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

import concurrent.futures as cf
import json
import os
import sys
import threading
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Tuple

from kernelwright.workflow import prompts as P
from kernelwright.workflow import roles as R
from kernelwright.workflow import runs as V
from kernelwright.workflow import worktrees as W
from kernelwright.workflow.config import ROLE_KEYS, CLAUDE_TOOLS, RunConfig, role_of
from kernelwright.workflow.evaljob import geomean_ratio, run_evaluation
from kernelwright.workflow.leases import Lease, LeasePool, LocalLeasePool
from kernelwright.workflow.state import State, dumps, loads

TERMINAL_ATTEMPT = ("passed", "failed")
EXIT_FINISHED, EXIT_WAITING, EXIT_STOPPED, EXIT_INTERRUPTED = 0, 3, 0, 130


class OrchestratorError(Exception):
    """The run cannot start (an agent backend is unavailable, the state is inconsistent)."""


@dataclass
class Job:
    key: Tuple[str, Any]
    lease_kind: Optional[str]
    holder: str
    role: str
    claim: Callable[[], None]
    work: Callable[[Optional[Lease]], Any]
    commit: Callable[[Any], None]
    label: str = ""


@dataclass
class TurnOutcome:
    agent: str
    role: str
    result: Any                       # kernelwright.agents.TurnResult
    started_at: float
    meta: Dict[str, Any] = field(default_factory=dict)


def _esc(text: Any) -> str:
    """Text for a rich-markup log line (brackets in agent/gate text are not markup)."""
    from rich.markup import escape

    return escape(str(text))


def _say(log: Callable[[str], None], msg: str) -> None:
    try:
        log(msg)
    except Exception:  # pragma: no cover - printing must never stop a run
        pass


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
        self.builtin = V.builtin_of(self.cfg)
        self.log = log
        self.pool: LeasePool = pool or LocalLeasePool(self.cfg.device_names(), self.cfg.quiet, self.cfg.turn_share)
        self.backends = backends if backends is not None else self._build_backends()
        self.check_agents = check_agents
        #: (request, lease, job_dir, timeout_s) -> verdict; the gate in a subprocess unless replaced
        self.evaluate = evaluator or run_evaluation
        self.repo = self.run_dir / "repo"
        self.inflight: Dict[cf.Future, Tuple[Job, Optional[Lease]]] = {}
        self.executor: Optional[cf.ThreadPoolExecutor] = None
        self._last_clock = time.time()
        self._last_leases: Optional[str] = None
        self._lock = threading.Lock()

    # ================================================================== setup
    def _build_backends(self) -> Dict[str, Any]:
        return build_backends(self.cfg, self.run_dir)

    def _check_backends(self) -> None:
        check_backends(self.backends)

    def _worktree(self, agent: str) -> Path:
        return self.run_dir / "worktrees" / agent

    def _begin(self) -> None:
        run = self.state.run()
        if run["pid"] and run["pid"] != os.getpid() and V.orchestrator_alive(self.state):
            raise OrchestratorError(f"run {run['id']} is already driven by process {run['pid']} "
                                    f"(stop it with kernelwright run stop {self.run_dir})")
        if self.check_agents:
            self._check_backends()
        for line in self.state.recover():
            _say(self.log, f"[yellow]resume[/yellow] {_esc(line)}")
        start = V.start_candidate(self.state)
        for agent in self.cfg.agent_names():
            W.ensure_worktree(self.repo, self._worktree(agent), f"wt/{agent}", start["commit_sha"])
        b = V.best(self.state)
        if b is not None:
            W.set_branch(self.repo, "best", b["commit_sha"])
        with self.state.tx() as c:
            run = c.execute("SELECT * FROM runs").fetchone()
            status = "waiting_operator" if run["status"] == "waiting_operator" else "running"
            control = "active" if run["control"] == "stopped" else run["control"]
            c.execute("UPDATE runs SET status=?, control=?, pid=?, heartbeat_at=?, sessions=sessions+1, stop_reason=NULL",
                      (status, control, os.getpid(), time.time()))
            State.event(c, "session", f"orchestrator started (pid {os.getpid()})")
        self._last_clock = time.time()

    # ================================================================== main loop
    def run(self) -> int:
        """Run until done.  Returns the exit code: 0 finished or stopped, 3 waiting for the
        operator (with ``wait_for_operator = false``), 130 interrupted."""
        self._begin()
        workers = len(self.cfg.agent_names()) + len(self.pool.devices()) + 2
        self.executor = cf.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="kw-step")
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
        return self._turn_block("plan") or "nothing left to do"

    def _end(self, status: str, reason: Optional[str], code: int, keep_status: bool = False) -> int:
        with self.state.tx() as c:
            c.execute("UPDATE runs SET status=?, stop_reason=?, pid=NULL", (status, reason))
            c.execute("DELETE FROM leases_live")
            State.event(c, "end", f"orchestrator exits: {status}" + (f" ({reason})" if reason else ""))
        _say(self.log, f"[bold]run {status}[/bold]" + (f": {_esc(reason)}" if reason else ""))
        return code

    def _interrupt(self) -> None:
        try:
            with self.state.tx() as c:
                c.execute("UPDATE runs SET status='interrupted', stop_reason='interrupted (Ctrl-C)', pid=NULL")
                State.event(c, "end", "orchestrator interrupted; resume with kernelwright optimize --resume")
        except Exception:  # pragma: no cover
            pass
        _say(self.log, "[yellow]interrupted[/yellow]: finished steps are saved; resume with "
                       f"kernelwright optimize --resume {self.run_dir}")

    def _set_status(self, status: str) -> None:
        with self.state.tx() as c:
            c.execute("UPDATE runs SET status=?", (status,))
            State.event(c, "status", f"run {status}")

    def _clock(self) -> None:
        now = time.time()
        if now - self._last_clock < 1.0:
            return
        with self.state.tx() as c:
            c.execute("UPDATE runs SET active_s=active_s+?, heartbeat_at=?", (now - self._last_clock, now))
        self._last_clock = now

    def _sync_leases(self) -> None:
        snap = self.pool.snapshot()
        key = json.dumps(sorted((s["holder"], s["kind"], s["device"] or "") for s in snap))
        if key == self._last_leases:
            return
        with self.state.tx() as c:
            c.execute("DELETE FROM leases_live")
            for s in snap:
                c.execute("INSERT OR REPLACE INTO leases_live(holder, kind, device, since) VALUES (?,?,?,?)",
                          (s["holder"], s["kind"], s["device"], s["since"]))
        self._last_leases = key

    # ================================================================== steps
    def _inflight_keys(self) -> set:
        return {job.key for job, _ in self.inflight.values()}

    def _start(self, job: Job) -> bool:
        if job.key in self._inflight_keys():
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
            _say(self.log, job.label + (f" on {lease.device}" if lease else ""))
        return True

    def _harvest(self, timeout: float) -> None:
        if not self.inflight:
            if timeout:
                time.sleep(timeout)
            return
        done, _ = cf.wait(list(self.inflight), timeout=timeout, return_when=cf.FIRST_COMPLETED)
        for fut in done:
            job, lease = self.inflight.pop(fut)
            held = self.pool.release(lease) if lease is not None else 0.0
            if lease is not None:
                with self.state.tx() as c:
                    c.execute("INSERT INTO device_usage(device, kind, holder, role, seconds, started_at) "
                              "VALUES (?,?,?,?,?,?)", (lease.device, lease.kind, job.holder, job.role, held, lease.since))
            exc = fut.exception()
            if exc is not None:
                tb = "".join(traceback.format_exception(exc))[-3000:]
                self.state.add_event("error", f"step {job.key} failed inside the orchestrator: {exc!r}", traceback=tb)
                _say(self.log, f"[red]step {job.key} failed: {_esc(repr(exc))}[/red]")
                self._step_failed(job, f"{type(exc).__name__}: {exc}")
                continue
            try:
                job.commit(fut.result())
            except Exception as exc:  # a bug in a commit must not lose the run: record it, fail the step
                tb = "".join(traceback.format_exception(exc))[-3000:]
                self.state.add_event("error", f"recording step {job.key} failed: {exc!r}", traceback=tb)
                _say(self.log, f"[red]recording step {job.key} failed: {_esc(repr(exc))}[/red]")
                self._step_failed(job, f"{type(exc).__name__}: {exc}")

    def _step_failed(self, job: Job, message: str) -> None:
        kind, ident = job.key
        with self.state.tx() as c:
            if kind == "code":
                c.execute("UPDATE attempts SET status='failed', outcome='internal_error', detail=?, finished_at=? "
                          "WHERE id=?", (message[:2000], time.time(), ident))
            elif kind == "check":
                c.execute("UPDATE attempts SET status='failed', outcome='internal_error', detail=?, finished_at=? "
                          "WHERE id=?", (message[:2000], time.time(), ident))
            elif kind == "final":
                c.execute("UPDATE candidates SET status='rejected', reason=?, decided_at=? WHERE id=?",
                          (f"evaluation error: {message[:500]}", time.time(), ident))
            elif kind == "profile":
                c.execute("UPDATE profiles SET status='failed', summary=? WHERE id=?", (message[:2000], ident))
            elif kind == "research":
                c.execute("UPDATE directions SET status='open', research_brief=? WHERE id=?",
                          (f"(research failed: {message[:300]})", ident))
            elif kind == "plan":
                c.execute("UPDATE cycles SET status='failed', error=?, finished_at=? WHERE id=?",
                          (message[:2000], time.time(), ident))
            elif kind == "synth":
                c.execute("UPDATE cycles SET synthesis_json=? WHERE id=?", (dumps({"error": message[:2000]}), ident))

    # ================================================================== budgets
    def _wall_block(self) -> Optional[str]:
        b = self.cfg.budget
        if b.max_wall_s is not None and self.state.run()["active_s"] >= b.max_wall_s:
            return f"budget: wall time {b.max_wall_s:.0f} s used"
        return None

    def _turn_block(self, kind: str) -> Optional[str]:
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
            started = self.state.value("SELECT COUNT(*) FROM attempts WHERE started_at IS NOT NULL")
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
        keys = self._inflight_keys()
        for c in self.state.rows("SELECT * FROM cycles WHERE status='coding'"):
            atts = self.state.rows("SELECT * FROM attempts WHERE cycle_id=?", c["id"])
            pending = [a for a in atts if a["status"] == "pending"]
            if pending and self._turn_block("code"):
                why = self._turn_block("code")
                with self.state.tx() as tx:
                    for a in pending:
                        tx.execute("UPDATE attempts SET status='failed', outcome='budget', detail=?, finished_at=? "
                                   "WHERE id=? AND status='pending'", (why, time.time(), a["id"]))
                continue
            if any(a["status"] not in TERMINAL_ATTEMPT for a in atts) or any(k[0] in ("code", "check") and k[1] in
                                                                            [a["id"] for a in atts] for k in keys):
                continue
            passed = [a for a in atts if a["status"] == "passed"]
            if len(passed) >= 2:
                with self.state.tx() as tx:
                    tx.execute("UPDATE cycles SET status='synthesis' WHERE id=? AND status='coding'", (c["id"],))
            else:
                self._queue_finals(c["id"], [self._cand_of_attempt(a["id"]) for a in passed], None, None)
        for c in self.state.rows("SELECT * FROM cycles WHERE status='final'"):
            open_ = self.state.value("SELECT COUNT(*) FROM candidates WHERE cycle_id=? AND status IN "
                                     "('pending_final','evaluating')", c["id"])
            if not open_ and ("final", None) not in keys:
                self._close_cycle(c["id"])

    def _cand_of_attempt(self, attempt_id: int) -> Dict[str, Any]:
        r = self.state.row("SELECT * FROM candidates WHERE attempt_id=?", attempt_id)
        return dict(r)

    def _queue_finals(self, cycle_id: int, ordered: List[Dict[str, Any]], merged: Optional[Dict[str, Any]],
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
                tx.execute("UPDATE candidates SET status='pending_final', final_rank=? WHERE id=?", (rank, c["id"]))
            for c, why in dropped:
                tx.execute("UPDATE candidates SET status='not_better', reason=?, decided_at=? WHERE id=?",
                           (why, now, c["id"]))
            for c in skipped:
                tx.execute("UPDATE candidates SET status='skipped', reason='over the per-cycle final limit', "
                           "decided_at=? WHERE id=?", (now, c["id"]))
            tx.execute("UPDATE cycles SET status='final' WHERE id=?", (cycle_id,))
        if not queue:
            self._close_cycle(cycle_id)

    def _close_cycle(self, cycle_id: int) -> None:
        """The cycle is over: update each direction's failure counts and apply the stall policy."""
        cfg = self.cfg
        with self.state.tx() as tx:
            cyc = tx.execute("SELECT * FROM cycles WHERE id=?", (cycle_id,)).fetchone()
            if cyc["status"] in ("done", "failed"):
                return
            promoted_cands = {r["id"] for r in tx.execute(
                "SELECT id FROM candidates WHERE cycle_id=? AND status='promoted'", (cycle_id,))}
            promoted_parents = set()
            for r in tx.execute("SELECT parent_ids_json FROM candidates WHERE cycle_id=? AND status='promoted' AND "
                                "origin='synthesis'", (cycle_id,)):
                promoted_parents.update(loads(r[0], []))
            by_dir: Dict[int, List[Tuple[bool, bool]]] = {}
            for a in tx.execute("SELECT at.*, asg.direction_id, asg.research_assisted FROM attempts at JOIN assignments "
                                "asg ON asg.id=at.assignment_id WHERE at.cycle_id=?", (cycle_id,)):
                if a["outcome"] in ("budget", "agent_error", "internal_error"):
                    continue
                cand = tx.execute("SELECT id FROM candidates WHERE attempt_id=?", (a["id"],)).fetchone()
                ok = cand is not None and (cand["id"] in promoted_cands or cand["id"] in promoted_parents)
                by_dir.setdefault(a["direction_id"], []).append((ok, bool(a["research_assisted"])))
            escalated = []
            for did, results in by_dir.items():
                d = tx.execute("SELECT * FROM directions WHERE id=?", (did,)).fetchone()
                if any(ok for ok, _ in results):
                    tx.execute("UPDATE directions SET successes=successes+1, failed_attempts=0, "
                               "research_failed_attempts=0 WHERE id=?", (did,))
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
                    State.event(tx, "stall", f"direction {d['name']}: {failed} failed attempts; asking the Researcher")
                tx.execute("UPDATE directions SET failed_attempts=?, research_failed_attempts=?, status=?, "
                           "research_requested=research_requested OR ?, operator_escalated=operator_escalated OR ? "
                           "WHERE id=?", (failed, rfailed, status, status == "research_requested",
                                          status == "escalated", did))
            tx.execute("UPDATE cycles SET status='done', finished_at=? WHERE id=?", (time.time(), cycle_id))
            State.event(tx, "cycle", f"cycle {cyc['idx']} done")
            if escalated:
                tx.execute("UPDATE runs SET status='waiting_operator'")
                msg = (f"direction(s) {', '.join(escalated)} failed after research: waiting for the operator "
                       f"(kernelwright run redirect|resume {self.run_dir.name})")
                State.event(tx, "escalated", msg, directions=escalated)
                tx.execute("INSERT INTO notes(at, source, text) VALUES (?,?,?)", (time.time(), "orchestrator", msg))
        if escalated:
            _say(self.log, f"[bold yellow]{_esc(msg)}[/bold yellow]")
        _say(self.log, f"[dim]cycle {cyc['idx']} done[/dim]")

    # ================================================================== what is ready
    def _ready(self, dry: bool = False) -> List[Job]:
        """Steps that may start now, in priority order.  With ``dry`` nothing is written."""
        jobs: List[Job] = []
        keys = self._inflight_keys()
        start = V.start_candidate(self.state)
        if start["status"] in ("pending_final", "evaluating"):
            if start["status"] == "pending_final":
                jobs.append(self._job_final(start))
            return jobs
        for c in self.state.rows("SELECT * FROM cycles WHERE status='final'"):
            if any(k[0] == "final" for k in keys):
                break
            cand = self.state.row("SELECT * FROM candidates WHERE cycle_id=? AND status='pending_final' "
                                  "ORDER BY final_rank LIMIT 1", c["id"])
            if cand is not None:
                jobs.append(self._job_final(V.candidate(self.state, cand["id"])))
        for a in self.state.rows("SELECT * FROM attempts WHERE status='coded' ORDER BY id"):
            jobs.append(self._job_check(a))
        busy = {self.state.value("SELECT agent FROM attempts WHERE id=?", k[1]) for k in keys if k[0] == "code"}
        for a in self.state.rows("SELECT * FROM attempts WHERE status='pending' ORDER BY id"):
            if a["agent"] in busy or self._turn_block("code"):
                continue
            busy.add(a["agent"])
            jobs.append(self._job_code(a))
        for c in self.state.rows("SELECT * FROM cycles WHERE status='synthesis'"):
            if ("synth", c["id"]) not in keys:
                jobs.append(self._job_synth(c))
        for p in self.state.rows("SELECT * FROM profiles WHERE status='pending' ORDER BY id"):
            jobs.append(self._job_profile(p))
        research_pending = False
        for d in self.state.rows("SELECT * FROM directions WHERE status IN ('research_requested','researching')"):
            research_pending = True
            if d["status"] == "research_requested" and not self._turn_block("research"):
                jobs.append(self._job_research(d))
        open_cycle = self.state.row("SELECT * FROM cycles WHERE status NOT IN ('done','failed') ORDER BY idx LIMIT 1")
        if open_cycle is not None:
            if open_cycle["status"] == "planning" and ("plan", open_cycle["id"]) not in keys:
                jobs.append(self._job_plan(open_cycle))
            return jobs
        run = self.state.run()
        profiling = self.state.value("SELECT COUNT(*) FROM profiles WHERE status IN ('pending','running')")
        if run["status"] == "waiting_operator" or research_pending or profiling or any(k[0] == "final" for k in keys):
            return jobs
        if self._planner_failures() >= self.cfg.max_planner_failures:
            if not dry:
                with self.state.tx() as tx:
                    tx.execute("UPDATE runs SET status='waiting_operator'")
                    State.event(tx, "escalated", f"{self.cfg.max_planner_failures} planning cycles failed in a row: "
                                                 "waiting for the operator")
            return jobs
        if self._agent_error_streak() >= 3:
            if not dry:
                with self.state.tx() as tx:
                    tx.execute("UPDATE runs SET status='waiting_operator'")
                    State.event(tx, "escalated", "3 coder turns in a row failed on the agent side: waiting for the "
                                                 "operator (check the agents' logs and credentials)")
            return jobs
        if self._turn_block("plan"):
            return jobs
        if dry:
            return jobs + [None]  # type: ignore[list-item]
        idx = (self.state.value("SELECT MAX(idx) FROM cycles") or 0) + 1
        with self.state.tx() as tx:
            cur = tx.execute("INSERT INTO cycles(idx, status, base_candidate, created_at) VALUES (?,?,?,?)",
                             (idx, "planning", run["best_candidate"], time.time()))
            State.event(tx, "cycle", f"cycle {idx} planning")
        jobs.append(self._job_plan(self.state.row("SELECT * FROM cycles WHERE id=?", cur.lastrowid)))
        return jobs

    def _planner_failures(self) -> int:
        n = 0
        for c in self.state.rows("SELECT status FROM cycles ORDER BY idx DESC"):
            if c["status"] != "failed":
                break
            n += 1
        return n

    def _agent_error_streak(self) -> int:
        n = 0
        for a in self.state.rows("SELECT outcome FROM attempts WHERE status IN ('passed','failed','coded') "
                                 "ORDER BY finished_at DESC"):
            if a["outcome"] != "agent_error":
                break
            n += 1
        return n

    # ================================================================== agent turns
    def _turn(self, agent: str, workspace: Path, prompt: str, metadata: Dict[str, Any],
              lease: Optional[Lease] = None, session_id: Optional[str] = None) -> TurnOutcome:
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
        base_def = self.builtin.name.replace("__quick", "")
        req = TurnRequest(
            workspace=workspace, prompt=prompt, system_prompt=P.role_prompt(role), session_id=session_id,
            allowed_tools=tools, timeout_s=self._turn_timeout(agent), role=role, env=env, metadata=metadata,
            gate_argv=[sys.executable, "-m", "kernelwright", "eval", "{workspace}/solution", *flags, "--out",
                       "{workspace}/.kernelwright/scratch/eval"],
            profiler_argv=[sys.executable, "-m", "kernelwright.workflow.profiler", "{workspace}/solution", "-d",
                           base_def] + (["--quick", "--device", "cpu"] if self.cfg.device == "cpu" else []))
        started = time.time()
        result = backend.run_turn(req)
        return TurnOutcome(agent, role, result, started)

    def _record_turn(self, tx, t: TurnOutcome, cycle_id=None, attempt_id=None, direction_id=None) -> None:
        r = t.result
        u = r.usage
        backend = self.backends[t.agent]
        tx.execute("INSERT INTO turns(role, agent, backend, model, cycle_id, attempt_id, direction_id, ok, error, "
                   "session_id, input_tokens, output_tokens, cache_read_tokens, cache_write_tokens, cost_usd, "
                   "duration_s, started_at, text) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
                   (t.role, t.agent, backend.config.backend, backend.config.model, cycle_id, attempt_id, direction_id,
                    int(bool(r.ok)), r.error, r.session_id, u.input_tokens, u.output_tokens, u.cache_read_tokens,
                    u.cache_write_tokens, float(u.cost_usd or 0.0), r.duration_s, t.started_at, (r.text or "")[:20000]))
        if r.session_id:
            tx.execute("UPDATE agents SET session_id=? WHERE name=?", (r.session_id, t.agent))

    def _session(self, agent: str) -> Optional[str]:
        settings = self.cfg.agent_settings(agent) if self.cfg.agents else {}
        if not settings.get("resume_session"):
            return None
        return self.state.value("SELECT session_id FROM agents WHERE name=?", agent)

    def _common_context(self) -> Dict[str, str]:
        b = V.best(self.state)
        prof = V.latest_profile(self.state, b["id"] if b else None)
        return {"best.md": P.best_md(b, V.start_candidate(self.state)),
                "profile.md": prof or "# Profile\n\nNo profile of the current best yet.\n",
                "history.md": P.history_md(V.cycles_view(self.state)),
                "directions.md": P.directions_md(V.directions_view(self.state)),
                "operator.md": P.operator_md(V.notes_view(self.state))}

    def _blocked_directions(self) -> Dict[str, str]:
        why = {"research_requested": "is waiting for a research brief", "researching": "is being researched",
               "escalated": "failed after research; only the operator can reopen it", "closed": "was closed"}
        return {d["name"]: why[d["status"]] for d in self.state.rows("SELECT * FROM directions") if d["status"] in why}

    # ---------------------------------------------------------------- plan
    def _job_plan(self, cycle) -> Job:
        cycle_id, idx = cycle["id"], cycle["idx"]
        ctx = self._common_context()
        blocked = self._blocked_directions()
        n_assign, coders = self.cfg.assignments_per_cycle, self.cfg.coders
        regimes = list(self.builtin.regimes_order)
        prompt = P.planner_prompt(idx, n_assign, coders, regimes, blocked, ctx, self.cfg.edit_surface)
        state_meta = {"cycle": idx, "best": (V.best(self.state) or {}).get("id"),
                      "directions": {d["name"]: d["status"] for d in V.directions_view(self.state)},
                      "notes": [n["text"] for n in V.notes_view(self.state)]}
        base = V.base_commit(self.state)
        wt = self._worktree("planner")
        session = self._session("planner")

        def work(lease):
            W.reset_worktree(wt, "wt/planner", base)
            W.write_context(wt, ctx)
            turns, plan, problems, sid = [], None, [], session
            for attempt in range(self.cfg.planner_retries + 1):
                text = prompt if attempt == 0 else P.plan_retry_prompt(problems)
                t = self._turn("planner", wt, text, {"cycle": idx, "retry": attempt, "state": state_meta},
                               session_id=sid)
                turns.append(t)
                if not t.result.ok:
                    problems = [f"turn failed: {t.result.error}"]
                    sid = session
                    continue
                sid = t.result.session_id
                try:
                    plan = R.parse_plan(t.result.text, max_assignments=n_assign, max_coders=coders,
                                        run_surface=self.cfg.edit_surface, regimes=regimes, blocked=blocked)
                    break
                except R.ReplyError as exc:
                    problems = exc.problems
            return turns, plan, problems

        def commit(res):
            turns, plan, problems = res
            self._commit_plan(cycle_id, idx, turns, plan, problems)

        return Job(("plan", cycle_id), None, "planner", "planner", lambda: None, work, commit,
                   label=f"[cyan]cycle {idx}[/cyan] planner thinking")

    def _commit_plan(self, cycle_id: int, idx: int, turns: List[TurnOutcome], plan: Optional[R.Plan],
                     problems: List[str]) -> None:
        now = time.time()
        coders = [f"coder-{i + 1}" for i in range(self.cfg.coders)]
        lines = []
        with self.state.tx() as tx:
            for t in turns:
                self._record_turn(tx, t, cycle_id=cycle_id)
            if plan is None:
                tx.execute("UPDATE cycles SET status='failed', error=?, finished_at=? WHERE id=?",
                           ("no valid plan: " + "; ".join(problems)[:1500], now, cycle_id))
                State.event(tx, "plan", f"cycle {idx}: no valid plan after {len(turns)} turn(s)", problems=problems)
                lines.append(f"[red]cycle {idx}: no valid plan[/red] ({_esc('; '.join(problems)[:200])})")
            else:
                run = tx.execute("SELECT best_candidate FROM runs").fetchone()
                base = V.base_commit(self.state)
                budget_left = None
                if self.cfg.budget.max_attempts is not None:
                    used = tx.execute("SELECT COUNT(*) FROM attempts").fetchone()[0]
                    budget_left = max(0, self.cfg.budget.max_attempts - used)
                slot = 0
                for a in plan.assignments:
                    d = tx.execute("SELECT * FROM directions WHERE name=?", (a.direction,)).fetchone()
                    if d is None:
                        cur = tx.execute("INSERT INTO directions(name, origin, description, status, created_at) "
                                         "VALUES (?,?,?,?,?)", (a.direction, "planner", a.hypothesis, "open", now))
                        did, assisted = cur.lastrowid, 0
                    else:
                        did, assisted = d["id"], int(bool(d["research_brief"]))
                    cur = tx.execute("INSERT INTO assignments(cycle_id, direction_id, hypothesis, target_regime, "
                                     "edit_surface_json, expected_evidence, instructions, research_assisted) "
                                     "VALUES (?,?,?,?,?,?,?,?)",
                                     (cycle_id, did, a.hypothesis, a.target_regime, dumps(a.edit_surface),
                                      a.expected_evidence, a.instructions, assisted))
                    n = min(len(coders), max(a.coders, self.cfg.attempts_per_assignment))
                    for _ in range(n):
                        if budget_left is not None:
                            if budget_left <= 0:
                                break
                            budget_left -= 1
                        tx.execute("INSERT INTO attempts(assignment_id, cycle_id, agent, base_commit, status) "
                                   "VALUES (?,?,?,?,?)", (cur.lastrowid, cycle_id, coders[slot % len(coders)], base,
                                                          "pending"))
                        slot += 1
                tx.execute("UPDATE cycles SET status='coding', plan_json=?, base_candidate=? WHERE id=?",
                           (plan.model_dump_json(), run["best_candidate"], cycle_id))
                State.event(tx, "plan", f"cycle {idx}: {len(plan.assignments)} assignment(s)",
                            directions=[a.direction for a in plan.assignments])
                lines.append(f"[cyan]cycle {idx}[/cyan] plan: " + _esc(", ".join(a.direction for a in plan.assignments)))
        for line in lines:
            _say(self.log, line)

    # ---------------------------------------------------------------- code
    def _assignment(self, attempt) -> Dict[str, Any]:
        r = self.state.row("SELECT asg.*, d.name AS direction, d.research_brief, c.idx AS cycle_idx FROM assignments asg "
                           "JOIN directions d ON d.id=asg.direction_id JOIN cycles c ON c.id=asg.cycle_id "
                           "WHERE asg.id=?", attempt["assignment_id"])
        a = dict(r)
        a["edit_surface"] = loads(a.pop("edit_surface_json"), [])
        a["attempt_id"] = attempt["id"]
        if not a["research_assisted"]:
            a["research_brief"] = None
        return a

    def _quick_cmd(self) -> str:
        flags = " --device cpu --quick" if self.cfg.device == "cpu" else ""
        return f"kernelwright eval solution{flags} --out .kernelwright/scratch/eval"

    def _job_code(self, attempt) -> Job:
        aid, agent, base = attempt["id"], attempt["agent"], attempt["base_commit"]
        asg = self._assignment(attempt)
        ctx = self._common_context()
        text = P.assignment_md(asg, agent, self._quick_cmd())
        ctx["assignment.md"] = text
        ctx["assignment.json"] = json.dumps({k: asg[k] for k in ("direction", "hypothesis", "target_regime",
                                                                 "edit_surface", "expected_evidence", "instructions",
                                                                 "attempt_id", "cycle_idx")}, indent=1)
        surface = [g for g in asg["edit_surface"]]
        wt = self._worktree(agent)
        evidence = self.run_dir / "attempts" / f"a{aid}"
        session = self._session(agent)
        meta = {"cycle": asg["cycle_idx"], "agent": agent, "attempt": aid,
                "assignment": {k: asg[k] for k in ("direction", "hypothesis", "target_regime", "edit_surface",
                                                   "instructions")}}

        def claim():
            with self.state.tx() as tx:
                tx.execute("UPDATE attempts SET status='coding', started_at=? WHERE id=?", (time.time(), aid))

        def work(lease):
            W.reset_worktree(wt, f"wt/{agent}", base)
            hashes = W.write_context(wt, ctx)
            t = self._turn(agent, wt, P.coder_prompt(text), meta, lease=lease, session_id=session)
            report = W.inspect_changes(wt, base, self.cfg.edit_surface, hashes)
            outside_asg = [p for p in report.changed if not W.matches(p, surface)]
            sha = None
            if t.result.ok and report.ok and not outside_asg and report.changed:
                sha = W.commit_surface(wt, base, report.changed, f"attempt a{aid} by {agent}")
                if sha:
                    evidence.mkdir(parents=True, exist_ok=True)
                    (evidence / "diff.patch").write_text(W.diff_between(self.repo, base, sha))
            return t, report, outside_asg, sha

        def commit(res):
            t, report, outside_asg, sha = res
            coder = R.parse_coder(t.result.text)
            now = time.time()
            if not t.result.ok:
                status, outcome, detail = "failed", "agent_error", f"{t.result.error_kind}: {t.result.error}"
            elif not report.ok:
                status, outcome, detail = "failed", "surface_violation", report.summary()
            elif outside_asg:
                status, outcome, detail = "failed", "surface_violation", \
                    f"outside the assignment's surface {surface}: {outside_asg[:6]}"
            elif not report.changed or sha is None:
                status, outcome, detail = "failed", "no_change", "the turn changed no kernel source"
            else:
                status, outcome, detail = "coded", None, None
            with self.state.tx() as tx:
                self._record_turn(tx, t, cycle_id=attempt["cycle_id"], attempt_id=aid)
                tx.execute("UPDATE attempts SET status=?, outcome=?, detail=?, commit_sha=?, changed_files_json=?, "
                           "agent_report=?, evidence_dir=?, finished_at=? WHERE id=?",
                           (status, outcome, detail, sha, dumps(report.changed + report.outside),
                            coder.model_dump_json(), str(evidence), now if status == "failed" else None, aid))
                State.event(tx, "attempt", f"a{aid} {agent}: {outcome or 'coded'}", detail=detail)
            color = "green" if status == "coded" else "red"
            _say(self.log, f"  a{aid} {agent} {_esc('[' + asg['direction'] + ']')}: [{color}]{outcome or 'coded'}[/{color}]"
                           + (f" - {_esc(detail[:160])}" if detail else ""))

        return Job(("code", aid), "turn", agent, "coder", claim, work, commit,
                   label=f"  a{aid} {agent} {_esc('[' + asg['direction'] + ']')} coding")

    # ---------------------------------------------------------------- check
    def _gate_dict(self) -> Dict[str, Any]:
        return self.cfg.gate.model_dump()

    def _job_check(self, attempt) -> Job:
        aid, agent, sha = attempt["id"], attempt["agent"], attempt["commit_sha"]
        evidence = self.run_dir / "attempts" / f"a{aid}"
        b = V.best(self.state)
        best_rows = (b or {}).get("final", {}).get("public", {}).get("workloads", [])
        base_cand = self.state.value("SELECT base_candidate FROM cycles WHERE id=?", attempt["cycle_id"])
        request = {"mode": "check", "definition": self.cfg.definition, "quick": self.cfg.quick, "device": self.cfg.device,
                   "solution_dir": str(evidence / "solution"), "label": f"a{aid}", "gate": self._gate_dict(),
                   "out": str(evidence / "check"),
                   # the best is timed alongside, on the same inputs and device: the ratio does not depend
                   # on how busy the machine was when the best's own numbers were taken
                   "compare_dir": str(Path(b["evidence_dir"]) / "solution") if b else None,
                   "compare_label": f"best-c{b['id']}" if b else None}

        def claim():
            with self.state.tx() as tx:
                tx.execute("UPDATE attempts SET status='checking' WHERE id=?", (aid,))

        def work(lease):
            W.export_solution(self.repo, sha, evidence / "solution")
            return self.evaluate(request, lease, evidence / "check", self.cfg.gate.timeout_s)

        def commit(verdict):
            now = time.time()
            pub = verdict.get("public", {})
            ratio = None
            if verdict.get("ok"):
                ratio = verdict.get("improvement") or geomean_ratio(best_rows, pub.get("workloads", []))
            with self.state.tx() as tx:
                if not verdict.get("ok"):
                    tx.execute("UPDATE attempts SET status='failed', outcome='gate:EVAL_ERROR', detail=?, check_json=?, "
                               "finished_at=? WHERE id=?", (verdict.get("error", "")[:2000], dumps(verdict), now, aid))
                    color, msg = "red", f"check failed to run: {verdict.get('error', '')[:160]}"
                elif pub.get("all_passed"):
                    tx.execute("UPDATE attempts SET status='passed', outcome='passed', check_json=?, finished_at=? "
                               "WHERE id=?", (dumps(verdict), now, aid))
                    tx.execute("INSERT INTO candidates(origin, attempt_id, cycle_id, commit_sha, parent_ids_json, status, "
                               "check_ratio, evidence_dir, created_at) VALUES (?,?,?,?,?,?,?,?,?)",
                               ("attempt", aid, attempt["cycle_id"], sha, dumps([base_cand] if base_cand else []),
                                "checked", ratio, str(evidence), now))
                    color, msg = "green", (f"check passed {pub['passed']}/{pub['total']}, mean "
                                           f"{pub['mean_latency_ms'] * 1e3:.1f} us"
                                           + (f", x{ratio:.2f} vs best" if ratio else ""))
                else:
                    ff = pub.get("first_failure") or {}
                    reason = ff.get("reason") or "FAILED"
                    detail = f"{pub.get('trusted', 0)}/{pub.get('total', 0)} passed; {ff.get('uuid', '')[:12]}: " \
                             f"{ff.get('status', '')} {reason}: {(ff.get('log_tail') or '').strip()[-600:]}"
                    tx.execute("UPDATE attempts SET status='failed', outcome=?, detail=?, check_json=?, finished_at=? "
                               "WHERE id=?", (f"gate:{reason}", detail, dumps(verdict), now, aid))
                    color, msg = "red", f"check failed: {reason} ({pub.get('trusted', 0)}/{pub.get('total', 0)} passed)"
                State.event(tx, "check", f"a{aid}: {msg}")
            _say(self.log, f"  a{aid} [{color}]{_esc(msg)}[/{color}]")

        return Job(("check", aid), "check", agent, "coder", claim, work, commit, label=f"  a{aid} gate check")

    # ---------------------------------------------------------------- synthesis
    def _job_synth(self, cycle) -> Job:
        cycle_id, idx = cycle["id"], cycle["idx"]
        atts = [V.attempt_view(self.state, a) for a in
                self.state.rows("SELECT * FROM attempts WHERE cycle_id=? AND status='passed' ORDER BY id", cycle_id)]
        cands = {a["id"]: self._cand_of_attempt(a["id"]) for a in atts}
        for a in atts:
            check = loads(a.get("check_json"), {})
            a["check_mean_ms"] = check.get("public", {}).get("mean_latency_ms")
            a["check_ratio"] = cands[a["id"]]["check_ratio"]
            a["report"] = R.parse_coder(a.get("agent_report") or "").summary if a.get("agent_report") else ""
            try:
                a["report"] = json.loads(a["agent_report"]).get("summary", "")
            except (TypeError, ValueError, AttributeError):
                pass
        base = self.state.value("SELECT base_commit FROM attempts WHERE cycle_id=? LIMIT 1", cycle_id)
        ctx = self._common_context()
        for a in atts:
            ctx[f"attempts/a{a['id']}.patch"] = W.diff_between(self.repo, base, a["commit_sha"])
            ctx[f"attempts/a{a['id']}.json"] = json.dumps({k: a.get(k) for k in (
                "id", "agent", "direction", "hypothesis", "check_mean_ms", "check_ratio", "report")}, indent=1)
        prompt = P.synthesizer_prompt(idx, atts)
        passed_ids = [a["id"] for a in atts]
        wt = self._worktree("synthesizer")
        evidence = self.run_dir / "cycles" / f"k{idx}-synthesis"
        blocked = self._turn_block("synthesis")
        meta = {"cycle": idx, "attempts": [{k: a.get(k) for k in ("id", "agent", "direction", "check_mean_ms",
                                                                  "check_ratio")} for a in atts]}

        def work(lease):
            if blocked:
                return None, None, None, None, blocked
            W.reset_worktree(wt, "wt/synthesizer", base)
            hashes = W.write_context(wt, ctx)
            t = self._turn("synthesizer", wt, prompt, meta, session_id=self._session("synthesizer"))
            decision, sha, problem = None, None, None
            if t.result.ok:
                try:
                    decision = R.parse_synthesis(t.result.text, passed_ids)
                except R.ReplyError as exc:
                    problem = str(exc)
            else:
                problem = f"turn failed: {t.result.error}"
            if decision is not None and decision.decision == "merge":
                report = W.inspect_changes(wt, base, self.cfg.edit_surface, hashes)
                if not report.ok:
                    problem, decision = f"merge rejected: {report.summary()}", None
                elif report.changed:
                    sha = W.commit_surface(wt, base, report.changed, f"cycle {idx} synthesis")
                    if sha:
                        W.export_solution(self.repo, sha, evidence / "solution")
                        (evidence / "diff.patch").write_text(W.diff_between(self.repo, base, sha))
                if sha is None and problem is None:
                    problem, decision = "merge produced no change", None
            return t, decision, sha, problem, None

        def commit(res):
            t, decision, sha, problem, why_blocked = res
            now = time.time()
            merged = None
            with self.state.tx() as tx:
                if t is not None:
                    self._record_turn(tx, t, cycle_id=cycle_id)
                record = {"decision": decision.model_dump() if decision else None, "problem": problem,
                          "mechanical": decision is None, "budget": why_blocked}
                tx.execute("UPDATE cycles SET synthesis_json=? WHERE id=?", (dumps(record), cycle_id))
                if sha is not None and decision is not None:
                    parents = [cands[a]["id"] for a in decision.attempts]
                    cur = tx.execute("INSERT INTO candidates(origin, cycle_id, commit_sha, parent_ids_json, status, "
                                     "evidence_dir, created_at) VALUES (?,?,?,?,?,?,?)",
                                     ("synthesis", cycle_id, sha, dumps(parents), "checked", str(evidence), now))
                    merged = dict(tx.execute("SELECT * FROM candidates WHERE id=?", (cur.lastrowid,)).fetchone())
                State.event(tx, "synthesis", f"cycle {idx}: " + (f"{decision.decision} {decision.attempt or decision.attempts}"
                                                                 if decision else f"mechanical selection ({problem or why_blocked})"))
            _say(self.log, "  synthesizer: " + _esc(f"{decision.decision} {decision.attempt or decision.attempts}"
                                                      if decision else f"mechanical selection ({problem or why_blocked})"))
            self._queue_finals(cycle_id, list(cands.values()), merged,
                               decision.model_dump() if decision is not None else None)

        return Job(("synth", cycle_id), None, "synthesizer", "synthesizer", lambda: None, work, commit,
                   label=f"  synthesizer comparing {len(atts)} passing attempts")

    # ---------------------------------------------------------------- final (gate)
    def _job_final(self, cand: Dict[str, Any]) -> Job:
        cid = cand["id"]
        evidence = Path(cand["evidence_dir"])
        b = V.best(self.state)
        compare = b if (b is not None and b["id"] != cid) else None
        request = {"mode": "final", "definition": self.cfg.definition, "quick": self.cfg.quick, "device": self.cfg.device,
                   "solution_dir": str(evidence / "solution"), "label": f"c{cid}",
                   "compare_dir": str(Path(compare["evidence_dir"]) / "solution") if compare else None,
                   "compare_label": f"best-c{compare['id']}" if compare else None,
                   "baselines": bool(self.cfg.baselines and cand["origin"] == "start"),
                   "gate": self._gate_dict(), "out": str(evidence / f"final-c{cid}")}
        compared_to = compare["id"] if compare else None

        def claim():
            with self.state.tx() as tx:
                tx.execute("UPDATE candidates SET status='evaluating' WHERE id=?", (cid,))

        def work(lease):
            if not (evidence / "solution").is_dir():
                W.export_solution(self.repo, cand["commit_sha"], evidence / "solution")
            return self.evaluate(request, lease, evidence / "final", self.cfg.gate.timeout_s)

        def commit(verdict):
            self._commit_final(cand, verdict, compared_to)

        label = "baseline: gate final evaluation of the starting solution" if cand["origin"] == "start" else \
            f"  c{cid} gate final evaluation (public + hidden, best re-timed alongside)"
        return Job(("final", cid), "official", f"final-c{cid}", "gate", claim, work, commit, label=label)

    def _commit_final(self, cand: Dict[str, Any], verdict: Dict[str, Any], compared_to: Optional[int]) -> None:
        cid = cand["id"]
        now = time.time()
        promoted = False
        with self.state.tx() as tx:
            run = tx.execute("SELECT * FROM runs").fetchone()
            best_id = run["best_candidate"]
            if cand["origin"] != "start" and best_id != compared_to:
                tx.execute("UPDATE candidates SET status='pending_final' WHERE id=?", (cid,))
                State.event(tx, "final", f"c{cid}: the best changed during its evaluation; evaluating again")
                return
            pub = verdict.get("public", {})
            hidden = verdict.get("hidden", {})
            status, reason, improvement = "rejected", None, verdict.get("improvement")
            if not verdict.get("ok"):
                reason = f"evaluation error: {verdict.get('error', '')[:400]}"
            elif not pub.get("all_passed"):
                ff = pub.get("first_failure") or {}
                reason = f"public split: {ff.get('reason', 'FAILED')} on {ff.get('uuid', '')[:12]}"
            elif not verdict.get("final_passed"):
                reason = f"hidden split: {hidden.get('passed', 0)}/{hidden.get('total', 0)} passed " \
                         f"({', '.join(hidden.get('reasons', [])) or 'HIDDEN_SPLIT_FAILED'})"
            elif cand["origin"] == "start" or best_id is None:
                status, reason = "promoted", "baseline" if cand["origin"] == "start" else "first passing candidate"
            elif improvement is None:
                compare = verdict.get("compare", {})
                if not compare.get("all_passed"):
                    status, reason = "promoted", "the current best failed when re-timed alongside"
                else:
                    reason = "no common workloads to compare"
            elif improvement >= 1.0 + self.cfg.min_improvement:
                status, reason = "promoted", f"x{improvement:.3f} over c{best_id}"
            else:
                status = "not_better"
                reason = f"x{improvement:.3f} over c{best_id} (needs >= x{1 + self.cfg.min_improvement:.3f})"
            tx.execute("UPDATE candidates SET status=?, reason=?, final_json=?, speedup=?, mean_latency_ms=?, "
                       "improvement=?, decided_at=? WHERE id=?",
                       (status, reason, dumps(verdict), pub.get("speedup"), pub.get("mean_latency_ms"),
                        improvement, now, cid))
            if status == "promoted":
                promoted = True
                totals = self.state.totals()
                tx.execute("UPDATE runs SET best_candidate=?", (cid,))
                tx.execute("INSERT INTO promotions(candidate_id, previous_best, at, active_s, tokens, cost_usd, speedup, "
                           "mean_latency_ms, improvement) VALUES (?,?,?,?,?,?,?,?,?)",
                           (cid, best_id, now, run["active_s"], totals["tokens"], totals["cost_usd"], pub.get("speedup"),
                            pub.get("mean_latency_ms"), improvement))
                if cand.get("cycle_id"):
                    tx.execute("UPDATE candidates SET status='skipped', reason='a sibling was promoted', decided_at=? "
                               "WHERE cycle_id=? AND status='pending_final'", (now, cand["cycle_id"]))
                if self.cfg.profile:
                    tx.execute("INSERT INTO profiles(candidate_id, status, created_at) VALUES (?,?,?)",
                               (cid, "pending", now))
            State.event(tx, "final", f"c{cid}: {status} ({reason})")
        if promoted:
            W.set_branch(self.repo, "best", cand["commit_sha"])
        color = {"promoted": "bold green", "not_better": "yellow"}.get(status, "red")
        _say(self.log, f"  c{cid} gate: [{color}]{status.upper()}[/{color}] {_esc(reason or '')}")

    # ---------------------------------------------------------------- profile
    def _job_profile(self, prof) -> Job:
        pid, cid = prof["id"], prof["candidate_id"]
        cand = V.candidate(self.state, cid)
        evidence = Path(cand["evidence_dir"])
        base_def = self.builtin.name.replace("__quick", "")

        def claim():
            with self.state.tx() as tx:
                tx.execute("UPDATE profiles SET status='running' WHERE id=?", (pid,))

        def work(lease):
            from kernelwright.workflow.profiler import run_profile

            return run_profile(evidence / "solution", base_def, self.cfg.quick, lease, evidence / "profile",
                               self.cfg.gate.timeout_s)

        def commit(res):
            tool, text = res
            with self.state.tx() as tx:
                tx.execute("UPDATE profiles SET status=?, tool=?, summary=?, path=?, finished_at=? WHERE id=?",
                           ("done" if tool != "none" else "failed", tool, text, str(evidence / "profile"),
                            time.time(), pid))
                State.event(tx, "profile", f"c{cid} profiled ({tool})")
            _say(self.log, f"  profiler: c{cid} ({tool})")

        return Job(("profile", pid), "profile", f"profile-c{cid}", "profiler", claim, work, commit,
                   label=f"  profiler on c{cid}")

    # ---------------------------------------------------------------- research
    def _job_research(self, d) -> Job:
        did = d["id"]
        direction = dict(d)
        failures = [V.attempt_view(self.state, a) for a in self.state.rows(
            "SELECT at.* FROM attempts at JOIN assignments asg ON asg.id=at.assignment_id WHERE asg.direction_id=? "
            "ORDER BY at.id", did)]
        ctx = self._common_context()
        prompt = P.researcher_prompt(direction, failures)
        wt = self._worktree("researcher")
        base = V.base_commit(self.state)
        meta = {"direction": direction["name"], "failures": [f["result"] for f in failures]}

        def claim():
            with self.state.tx() as tx:
                tx.execute("UPDATE directions SET status='researching' WHERE id=?", (did,))

        def work(lease):
            W.reset_worktree(wt, "wt/researcher", base)
            W.write_context(wt, ctx)
            t = self._turn("researcher", wt, prompt, meta, session_id=self._session("researcher"))
            brief = None
            if t.result.ok:
                try:
                    brief = R.parse_research(t.result.text)
                except R.ReplyError:
                    brief = None
            return t, brief

        def commit(res):
            t, brief = res
            if brief is not None:
                text = brief.brief + ("\n\n" + "\n".join(f"- {i.idea} ({i.provenance}{': ' + i.reference if i.reference else ''})"
                                                         for i in brief.ideas) if brief.ideas else "")
            else:
                text = f"(the researcher produced no brief: {t.result.error or 'unparseable reply'})"
            with self.state.tx() as tx:
                self._record_turn(tx, t, direction_id=did)
                tx.execute("UPDATE directions SET status='open', research_brief=? WHERE id=?", (text[:8000], did))
                State.event(tx, "research", f"brief for {direction['name']}")
            _say(self.log, f"  researcher: brief for {_esc('[' + direction['name'] + ']')}")

        return Job(("research", did), None, "researcher", "researcher", claim, work, commit,
                   label=f"  researcher on stalled direction {_esc('[' + direction['name'] + ']')}")


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
