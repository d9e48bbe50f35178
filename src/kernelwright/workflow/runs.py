"""Creating a run folder, and the read-only views of a run used by the loop, console and report.

A run folder::

    RUN/state.sqlite            the state (kernelwright.workflow.state)
    RUN/repo/                   the run repository (branch ``best`` = the current best)
    RUN/worktrees/<agent>/      one git worktree per agent
    RUN/candidates/start/       evidence of the starting solution (solution/, final/, profile/)
    RUN/attempts/a<N>/          evidence of attempt N (solution/, diff.patch, check/, final/, profile/)
    RUN/cycles/k<N>-synthesis/  evidence of a merged candidate
    RUN/agents/{logs,state}/    the agent clients' raw logs and state (never inside a worktree)
    RUN/report.html             ``kernelwright run report RUN``
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from kernelwright.workflow.config import ConfigError, RunConfig, role_of
from kernelwright.workflow.state import State, loads
from kernelwright.workflow import worktrees


def builtin_of(cfg: RunConfig):
    """The (quick variant of the) built-in definition of a run.  Raises UnknownDefinition."""
    from kernelwright import definitions

    b = definitions.resolve(cfg.definition)
    return b.quick_if(cfg.quick)


def default_run_dir(definition: str) -> Path:
    from kernelwright.definitions.base import base_name

    stamp = _dt.datetime.now().strftime("%Y%m%d-%H%M%S")
    return Path("kw-runs") / f"{base_name(definition)}-{stamp}"


def start_solution_dir(cfg: RunConfig) -> Path:
    """The starting solution folder: ``cfg.solution`` or the one shipped solution for the
    definition.  Raises ConfigError."""
    if cfg.solution:
        path = Path(cfg.solution)
        if not (path / "manifest.json").is_file():
            raise ConfigError(f"{path}: not a solution folder (no manifest.json)")
        return path
    from kernelwright.solutions import SHIPPED_ROOT, shipped_solutions

    base = builtin_of(cfg).base_name
    found = [s for s in shipped_solutions(base)]
    if len(found) != 1:
        raise ConfigError(f"no single shipped solution for {base}: pass --solution FOLDER")
    for manifest in sorted(SHIPPED_ROOT.glob("*/manifest.json")):
        if json.loads(manifest.read_text()).get("name") == found[0].name:
            return manifest.parent
    raise ConfigError(f"cannot locate the folder of {found[0].name}")


def create_run(run_dir: Path, cfg: RunConfig) -> State:
    """Create the run folder, its state, the run repository and the starting candidate.

    Raises ConfigError (bad solution or definition, existing run folder) and GitError.
    """
    from kernelwright.skills import skills_dir
    from kernelwright.solutions import load_solution_folder
    from kernelwright.workflow.prompts import task_md

    run_dir = Path(run_dir)
    if (run_dir / "state.sqlite").exists():
        raise ConfigError(f"{run_dir} already holds a run: use --resume {run_dir}")
    builtin = builtin_of(cfg)
    sol_dir = start_solution_dir(cfg)
    try:
        sol = load_solution_folder(sol_dir)
    except (ValueError, KeyError) as exc:
        raise ConfigError(f"{sol_dir}: {exc}") from None
    problem = builtin.foreign_solution(sol)
    if problem:
        raise ConfigError(problem)
    cfg = cfg.model_copy(update={"solution": str(Path(sol_dir).resolve())})
    state = State(run_dir, create=True)
    sha = worktrees.create_run_repo(run_dir / "repo", sol_dir, {".kernelwright/task.md": task_md(
        builtin, cfg.quick, cfg.device, cfg.edit_surface)}, skills_dir())
    worktrees.set_branch(run_dir / "repo", "best", sha)
    evidence = run_dir / "candidates" / "start"
    worktrees.export_solution(run_dir / "repo", sha, evidence / "solution")
    now = time.time()
    with state.tx() as c:
        c.execute("INSERT INTO runs(id, definition, created_at, status, control, config_json) VALUES (?,?,?,?,?,?)",
                  (run_dir.name, builtin.name, now, "created", "active", cfg.model_dump_json()))
        c.execute("INSERT INTO candidates(origin, commit_sha, status, evidence_dir, created_at) VALUES (?,?,?,?,?)",
                  ("start", sha, "pending_final", str(evidence), now))
        for name in cfg.agent_names():
            s = cfg.agent_settings(name)
            c.execute("INSERT INTO agents(name, role, backend, model, worktree) VALUES (?,?,?,?,?)",
                      (name, role_of(name), s["backend"], s.get("model"), str(run_dir / "worktrees" / name)))
        State.event(c, "created", f"run created for {builtin.name} from {sol.name}", solution=str(sol_dir))
    return state


# -- views ----------------------------------------------------------------------------------
def candidate(state: State, cid: Optional[int]) -> Optional[Dict[str, Any]]:
    if cid is None:
        return None
    r = state.row("SELECT * FROM candidates WHERE id=?", cid)
    if r is None:
        return None
    d = dict(r)
    d["final"] = loads(d.get("final_json"), {})
    d["parents"] = loads(d.get("parent_ids_json"), [])
    return d


def best(state: State) -> Optional[Dict[str, Any]]:
    return candidate(state, state.run()["best_candidate"])


def start_candidate(state: State) -> Optional[Dict[str, Any]]:
    r = state.row("SELECT id FROM candidates WHERE origin='start'")
    return candidate(state, r["id"]) if r else None


IMPROVEMENT_HOW = ("the product of the side-by-side ratios measured at each promotion: the geometric mean over "
                   "the public workloads of the previous best's latency / the new best's, both timed in the same "
                   "final evaluation")


def chained_improvement(points: List[Dict[str, Any]]) -> Dict[int, float]:
    """candidate id -> improvement over the first best, chaining each promotion's side-by-side
    ratio to the best it replaced (``points``: the promotions rows in order; monotone by
    construction; invalidated promotions skipped)."""
    value: Dict[int, float] = {}
    for p in points:
        if p["invalidated_at"] is not None:
            continue
        value[p["candidate_id"]] = value.get(p["previous_best"], 1.0) * (p["improvement"] or 1.0)
    return value


def improvement_over_start(state: State) -> Optional[Dict[str, Any]]:
    """How much faster the best is than the first best, as ``run status`` and ``run report`` both
    say it: ``{"value", "over", "how"}`` -- ``value`` from ``chained_improvement`` (``how``:
    ``IMPROVEMENT_HOW``), ``over`` names the first best (the starting solution when it passed the
    gate, else the first candidate that did).  Not the ratio of two mean latencies: those come from
    different evaluations (other inputs, other load) and are dominated by the largest workload.
    None before a promotion."""
    b = best(state)
    points = [dict(r) for r in state.rows("SELECT * FROM promotions ORDER BY id")]
    valid = [p for p in points if p["invalidated_at"] is None]
    if b is None or not valid:
        return None
    chain = chained_improvement(points)
    if b["id"] not in chain:
        return None
    first = candidate(state, valid[0]["candidate_id"])
    over = (f"the starting solution c{first['id']}" if first and first.get("origin") == "start"
            else f"the first passing candidate c{valid[0]['candidate_id']} (the starting solution did not pass)")
    return {"value": chain[b["id"]], "over": over, "how": IMPROVEMENT_HOW}


def base_commit(state: State) -> str:
    b = best(state) or start_candidate(state)
    return b["commit_sha"]


def attempt_view(state: State, a) -> Dict[str, Any]:
    """One attempt with its assignment and a one-line result, for prompts and reports."""
    a = dict(a)
    asg = state.row("SELECT a.*, d.name AS direction FROM assignments a JOIN directions d ON d.id=a.direction_id "
                    "WHERE a.id=?", a["assignment_id"])
    a["direction"] = asg["direction"]
    a["hypothesis"] = asg["hypothesis"]
    a["research_assisted"] = asg["research_assisted"]
    check = loads(a.get("check_json"), {})
    cand = state.row("SELECT id, status, reason, improvement FROM candidates WHERE attempt_id=?", a["id"])
    if a["status"] == "passed":
        mean = check.get("public", {}).get("mean_latency_ms")
        res = "passed check" + (f" (mean {mean * 1e3:.1f} us" if mean else " (")
        ratio = state.value("SELECT check_ratio FROM candidates WHERE attempt_id=?",
                                                              a["id"])
        res += f", x{ratio:.2f} vs best)" if ratio else ")"
        if cand is not None and cand["status"] != "checked":
            res += f"; c{cand['id']} {cand['status']}"
            if cand["status"] == "promoted" and cand["improvement"]:
                res += f" (x{cand['improvement']:.2f})"
            elif cand["reason"]:
                res += f" ({cand['reason'][:120]})"
    elif a["status"] == "failed":
        res = f"{a['outcome']}: {(a.get('detail') or '')[:200]}"
    else:
        res = a["status"]
    a["result"] = res
    return a


def cycles_view(state: State) -> List[Dict[str, Any]]:
    out = []
    for c in state.rows("SELECT * FROM cycles ORDER BY idx"):
        d = dict(c)
        d["attempts"] = [attempt_view(state, a) for a in state.rows("SELECT * FROM attempts WHERE cycle_id=? ORDER BY id",
                                                                     c["id"])]
        d["finals"] = [dict(r) for r in state.rows("SELECT id, status, reason FROM candidates WHERE cycle_id=? AND "
                                                   "final_rank IS NOT NULL ORDER BY final_rank", c["id"])]
        out.append(d)
    return out


def directions_view(state: State) -> List[Dict[str, Any]]:
    return [dict(r) for r in state.rows("SELECT * FROM directions ORDER BY id")]


def notes_view(state: State) -> List[Dict[str, Any]]:
    return [dict(r) for r in state.rows("SELECT * FROM notes ORDER BY id")]


def latest_profile(state: State, cid: Optional[int]) -> Optional[str]:
    if cid is None:
        return None
    return state.value("SELECT summary FROM profiles WHERE candidate_id=? AND status='done' ORDER BY id DESC LIMIT 1",
                       cid)


def orchestrator_alive(state: State, stale_s: float = 30.0) -> bool:
    """Whether an orchestrator process holds this run now (pid alive, heartbeat recent)."""
    run = state.run()
    pid, beat = run["pid"], run["heartbeat_at"]
    if not pid or not beat or time.time() - beat > stale_s:
        return False
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, PermissionError, ValueError):
        return False
    return True
