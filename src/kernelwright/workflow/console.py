"""The operator console: inspect and steer a run through its SQLite file, live or not.

Every command is one transaction on ``RUN/state.sqlite`` plus an ``operator_events`` row (the
audit trail).  A running orchestrator reads the run's ``control`` and ``status`` on every
tick, so the commands take effect within one poll interval; on a stopped run they take effect
when ``kernelwright optimize --resume RUN`` starts it again.

* ``pause`` / ``resume``: no new steps start while paused (running ones finish); ``resume``
  also releases a run that waits for the operator.
* ``stop``: the orchestrator finishes the running steps and exits (resumable).
* ``redirect TEXT [--reference R] [--name SLUG] [--reopen DIRECTION]``: a new direction for
  the Planner (or reopen an escalated one with new context); releases a waiting run.
* ``note TEXT``: a note every later Planner prompt shows.
* ``invalidate CANDIDATE``: drop a candidate from best; the best falls back to the latest
  promoted candidate still valid.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any, Dict, Optional

from kernelwright.workflow import runs
from kernelwright.workflow.state import State, StateError


class ConsoleError(ValueError):
    """An operator command that cannot apply (one line)."""


def open_run(run_dir: Path) -> State:
    """Raises StateError when the folder is not a run."""
    return State(Path(run_dir))


def _audit(tx, command: str, args: Dict[str, Any], result: str) -> None:
    tx.execute("INSERT INTO operator_events(at, command, args_json, result) VALUES (?,?,?,?)",
               (time.time(), command, json.dumps(args), result))
    State.event(tx, "operator", f"{command}: {result}", **args)


def set_control(state: State, command: str) -> str:
    """pause | resume | stop.  Returns a one-line result."""
    with state.tx() as tx:
        run = tx.execute("SELECT * FROM runs").fetchone()
        if command == "pause":
            tx.execute("UPDATE runs SET control='paused'")
            result = "paused: no new steps start; running steps finish"
        elif command == "resume":
            tx.execute("UPDATE runs SET control='active'")
            if run["status"] in ("waiting_operator", "paused"):
                tx.execute("UPDATE runs SET status='running' WHERE status IN ('waiting_operator','paused')")
            result = "resumed" + (" (released from waiting for the operator)" if run["status"] == "waiting_operator"
                                  else "")
        elif command == "stop":
            tx.execute("UPDATE runs SET control='stopped'")
            result = "stopping: running steps finish, then the orchestrator exits (resume with optimize --resume)"
        else:
            raise ConsoleError(f"unknown control {command!r}")
        _audit(tx, command, {}, result)
    return result


def _slug(text: str) -> str:
    s = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return (s[:40].rstrip("-") or "operator")


def redirect(state: State, text: str, reference: Optional[str] = None, name: Optional[str] = None,
             reopen: Optional[str] = None) -> str:
    """Add an operator direction (or reopen one); releases a run waiting for the operator."""
    if not text.strip():
        raise ConsoleError("redirect needs a description of the new direction")
    now = time.time()
    with state.tx() as tx:
        if reopen:
            d = tx.execute("SELECT * FROM directions WHERE name=?", (reopen,)).fetchone()
            if d is None:
                raise ConsoleError(f"no direction named {reopen!r}")
            tx.execute("UPDATE directions SET status='open', failed_attempts=0, research_failed_attempts=0, "
                       "research_requested=0, research_brief=NULL, description=?, reference=COALESCE(?, reference) "
                       "WHERE id=?", (f"{d['description']}\nOperator: {text}", reference, d["id"]))
            result = f"direction {reopen} reopened with new context"
        else:
            slug = name or "op-" + _slug(text)
            from kernelwright.workflow.roles import SLUG

            if not SLUG.match(slug):
                raise ConsoleError(f"direction name {slug!r} must be a slug (lowercase letters, digits, '-')")
            base, i = slug, 2
            while tx.execute("SELECT 1 FROM directions WHERE name=?", (slug,)).fetchone():
                slug = f"{base[:44]}-{i}"
                i += 1
            tx.execute("INSERT INTO directions(name, origin, description, reference, status, created_at) "
                       "VALUES (?,?,?,?,?,?)", (slug, "operator", text, reference, "open", now))
            result = f"new direction {slug} for the Planner"
        tx.execute("INSERT INTO notes(at, source, text) VALUES (?,?,?)",
                   (now, "operator", f"REDIRECT: {text}" + (f" (reference: {reference})" if reference else "")))
        tx.execute("UPDATE runs SET status='running' WHERE status='waiting_operator'")
        _audit(tx, "redirect", {"text": text, "reference": reference, "name": name, "reopen": reopen}, result)
    return result


def note(state: State, text: str) -> str:
    if not text.strip():
        raise ConsoleError("a note needs text")
    with state.tx() as tx:
        tx.execute("INSERT INTO notes(at, source, text) VALUES (?,?,?)", (time.time(), "operator", text))
        _audit(tx, "note", {"text": text}, "noted")
    return "noted: the Planner sees it from its next turn"


def parse_candidate(ref: str) -> int:
    m = re.fullmatch(r"c?(\d+)", ref.strip())
    if not m:
        raise ConsoleError(f"{ref!r} is not a candidate id (e.g. c4 or 4)")
    return int(m.group(1))


def invalidate(state: State, ref: str, reason: str = "") -> str:
    """Drop a candidate from best (and from the speedup curve)."""
    cid = parse_candidate(ref)
    with state.tx() as tx:
        cand = tx.execute("SELECT * FROM candidates WHERE id=?", (cid,)).fetchone()
        if cand is None:
            raise ConsoleError(f"no candidate c{cid}")
        if cand["status"] == "invalidated":
            raise ConsoleError(f"c{cid} is already invalidated")
        now = time.time()
        tx.execute("UPDATE candidates SET status='invalidated', reason=? WHERE id=?",
                   (f"invalidated by the operator: {reason}" if reason else "invalidated by the operator", cid))
        tx.execute("UPDATE promotions SET invalidated_at=? WHERE candidate_id=? AND invalidated_at IS NULL", (now, cid))
        run = tx.execute("SELECT best_candidate FROM runs").fetchone()
        result = f"c{cid} invalidated"
        if run["best_candidate"] == cid:
            prev = tx.execute("SELECT p.candidate_id FROM promotions p JOIN candidates c ON c.id=p.candidate_id "
                              "WHERE p.invalidated_at IS NULL AND c.status='promoted' ORDER BY p.id DESC LIMIT 1"
                              ).fetchone()
            new_best = prev["candidate_id"] if prev else None
            tx.execute("UPDATE runs SET best_candidate=?", (new_best,))
            result += f"; best is now {'c' + str(new_best) if new_best else 'none'}"
        _audit(tx, "invalidate", {"candidate": cid, "reason": reason}, result)
    b = runs.best(state)
    try:
        from kernelwright.workflow import worktrees

        worktrees.set_branch(state.run_dir / "repo", "best", (b or runs.start_candidate(state))["commit_sha"])
    except Exception:  # the branch is re-synchronised when the orchestrator starts
        pass
    return result


# -- status ---------------------------------------------------------------------------------
def status(state: State) -> Dict[str, Any]:
    """Everything ``kernelwright run status`` shows, as plain data."""
    run = dict(state.run())
    cfg = json.loads(run.pop("config_json"))
    b = runs.best(state)
    start = runs.start_candidate(state)
    totals = state.totals()
    cur = state.row("SELECT * FROM cycles ORDER BY idx DESC LIMIT 1")
    attempts = []
    if cur is not None:
        attempts = [runs.attempt_view(state, a) for a in state.rows("SELECT * FROM attempts WHERE cycle_id=? ORDER BY id",
                                                                  cur["id"])]
    finals = [dict(r) for r in state.rows("SELECT id, status, reason FROM candidates WHERE status IN "
                                          "('pending_final','evaluating') ORDER BY id")]
    leases = [dict(r) for r in state.rows("SELECT * FROM leases_live ORDER BY since")]
    events = [dict(r) for r in state.rows("SELECT at, kind, message FROM events ORDER BY id DESC LIMIT 12")][::-1]
    improvement = runs.improvement_over_start(state)
    return {"run": run, "config": cfg, "live": runs.orchestrator_alive(state), "best": b, "start": start,
            "improvement_over_start": improvement["value"] if improvement else None,
            "improvement": improvement, "totals": totals,
            "cycle": dict(cur) if cur is not None else None, "attempts": attempts, "finals": finals,
            "leases": leases, "directions": runs.directions_view(state), "events": events,
            "promotions": [dict(r) for r in state.rows("SELECT * FROM promotions ORDER BY id")]}


def _ago(t: Optional[float]) -> str:
    if not t:
        return "-"
    s = time.time() - t
    return f"{s:.0f}s ago" if s < 120 else f"{s / 60:.0f} min ago" if s < 7200 else f"{s / 3600:.1f} h ago"


def render_status(info: Dict[str, Any], console) -> None:
    """Print a status snapshot with rich."""
    from rich.markup import escape
    from rich.table import Table

    from kernelwright.diagnostics import clip

    run, t, budget = info["run"], info["totals"], info["config"].get("budget", {})
    live = "[green]orchestrator running[/green]" if info["live"] else "[yellow]no orchestrator attached[/yellow]"
    console.print(f"[bold]{run['id']}[/bold]  {run['definition']}  status [bold]{run['status']}[/bold]  "
                  f"control {run['control']}  {live}")
    if run.get("stop_reason"):
        console.print(f"  last stop: {escape(run['stop_reason'])}")
    b, start = info["best"], info["start"]
    if b:
        imp = info.get("improvement")
        console.print(f"  best: c{b['id']} ({b['origin']}), speedup vs reference {b.get('speedup') or 0:.3f}x, "
                      f"mean {(b.get('mean_latency_ms') or 0) * 1e3:.1f} us"
                      + (f", x{imp['value']:.2f} over {imp['over']}" if imp else ""))
        if imp:
            console.print(f"  (improvement: {imp['how']}; the same figure as kernelwright run report)", style="dim")
    else:
        console.print("  best: none yet" + (f" (start: {start['status']})" if start else ""))

    def lim(v, cap, fmt="{:.0f}"):
        return fmt.format(v) + (f" / {fmt.format(cap)}" if cap else "")

    console.print(f"  used: tokens {lim(t['tokens'], budget.get('max_tokens'))}, cost ${lim(t['cost_usd'], budget.get('max_cost_usd'), '{:.2f}')}, "
                  f"attempts {lim(t['attempts'], budget.get('max_attempts'))}, cycles {lim(t['cycles'], budget.get('max_cycles'))}, "
                  f"time {lim(run['active_s'], budget.get('max_wall_s'))} s, device {t['device_s']:.0f} s, turns {t['turns']}")
    agents = info["config"].get("agents", {})
    if agents and all(a.get("backend") == "scripted" for a in agents.values() if isinstance(a, dict)):
        console.print("  (scripted agents: their token and cost figures are made up by the script; nothing was spent)")
    if info["cycle"]:
        c = info["cycle"]
        console.print(f"  cycle {c['idx']}: {c['status']}")
        for a in info["attempts"]:
            console.print(f"    a{a['id']} {a['agent']} {escape('[' + a['direction'] + ']')}: {escape(clip(a['result'], 150))}")
    for f in info["finals"]:
        console.print(f"  gate queue: c{f['id']} {f['status']}")
    waiting = [l for l in info["leases"] if l["device"] is None]
    for l in info["leases"]:
        where = l["device"] or "[yellow]waiting for a device[/yellow]"
        console.print(f"  lease: {escape(l['holder'])} ({l['kind']}) {where} since {_ago(l['since'])}")
    if waiting:
        console.print(f"  [yellow]{len(waiting)} step(s) waiting for a device[/yellow]")
    if info["directions"]:
        table = Table(title="directions", title_justify="left", show_edge=False)
        for col in ("direction", "origin", "status", "fails", "research fails", "wins"):
            table.add_column(col)
        for d in info["directions"]:
            table.add_row(d["name"], d["origin"], d["status"], str(d["failed_attempts"]),
                          str(d["research_failed_attempts"]), str(d["successes"]))
        console.print(table)
    console.print("  recent events:")
    for e in info["events"]:
        console.print(f"    {time.strftime('%H:%M:%S', time.localtime(e['at']))} {e['kind']:9s} {escape(clip(e['message'], 140))}")
    if run["status"] == "waiting_operator":
        console.print(f"[bold yellow]waiting for the operator[/bold yellow]: kernelwright run redirect {run['id']} "
                      f"\"...\"  or  kernelwright run resume {run['id']}")


__all__ = ["ConsoleError", "StateError", "invalidate", "note", "open_run", "redirect", "render_status", "set_control",
           "status"]
