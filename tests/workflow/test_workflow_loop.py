"""The orchestrator's state machine with scripted agents and a stand-in for the gate (fast).

The real gate runs in test_workflow_e2e.py; here verdicts come from ``FakeGate`` so that the
stall policy, escalation, operator commands, budgets and planner retries can be exercised in
seconds.
"""

from __future__ import annotations

import json
import threading

import pytest

from kernelwright.agents import AgentConfig, ScriptedBackend
from kernelwright.workflow import console as C
from kernelwright.workflow.loop import Orchestrator
from kernelwright.workflow.runs import create_run
from kernelwright.workflow.state import State

from workflow_helpers import FakeGate, demo_config

GOOD = "# good kernel\nimport torch\n\ndef run(x, weight, eps, y):\n    pass  # GOOD\n"
BAD = "# bad kernel\nimport torch\n\ndef run(x, weight, eps, y):\n    pass  # BAD\n"


def latency(src: str):
    if "BAD" in src:
        return None           # the gate rejects it
    if "GOOD" in src:
        return 2.0
    return 10.0               # the starting solution


def plan_text(direction, coders=1, surface="solution/kernel.py"):
    plan = {"assignments": [{"direction": direction, "hypothesis": f"try {direction} to go faster",
                             "target_regime": "all", "edit_surface": [surface],
                             "expected_evidence": "lower latency", "coders": coders}]}
    return "```json\n" + json.dumps(plan) + "\n```"


class Team:
    """Scripted agents whose choices depend on the turn's metadata; records every turn."""

    def __init__(self, planner=None, coder=None):
        self.calls = []
        self.planner = planner or (lambda meta: plan_text(
            next((d for d in meta["state"]["directions"] if d.startswith("op-")), "bad-idea")))
        self.coder = coder or (lambda asg: {"solution/kernel.py": GOOD if asg["direction"].startswith("op-") else BAD})

    def __call__(self, req):
        meta = req.metadata or {}
        self.calls.append((req.role, meta))
        usage = {"input_tokens": 1000, "output_tokens": 100}
        if req.role == "planner":
            return {"text": self.planner(meta), "usage": usage}
        if req.role == "coder":
            return {"files": self.coder(meta["assignment"]), "text": '{"summary": "done"}', "usage": usage}
        if req.role == "researcher":
            return {"text": '{"brief": "look at the reference again"}', "usage": usage}
        return {"text": '{"decision": "select", "attempt": %d}' % meta["attempts"][0]["id"], "usage": usage}

    def roles(self):
        return [r for r, _ in self.calls]


def orchestrator(run_dir, cfg, team, gate=None, log=None):
    backends = {name: ScriptedBackend(team, AgentConfig(backend="scripted", max_retries=0, retry_backoff_s=0))
                for name in cfg.agent_names()}
    return Orchestrator(run_dir, backends=backends, evaluator=gate or FakeGate(latency), log=log or (lambda m: None))


def test_stall_research_escalation_and_redirect(tmp_path):
    cfg = demo_config(coders=1, profile=False, max_cycles=10, stall_attempts=3, research_attempts=2)
    run = tmp_path / "run"
    create_run(run, cfg)
    team = Team()
    code = orchestrator(run, cfg, team).run()
    assert code == 3                                    # waiting for the operator (wait_for_operator = false)
    st = State(run)
    d = st.row("SELECT * FROM directions WHERE name='bad-idea'")
    assert d["status"] == "escalated" and d["research_requested"] and d["research_brief"]
    assert d["failed_attempts"] == 3 and d["research_failed_attempts"] == 2
    assert team.roles().count("researcher") == 1
    assert team.roles().count("coder") == 5
    assert st.run()["status"] == "waiting_operator"
    assisted = st.rows("SELECT research_assisted FROM assignments ORDER BY id")
    assert [a[0] for a in assisted] == [0, 0, 0, 1, 1]
    # the baseline passed and is the best; no candidate beyond it
    assert st.value("SELECT COUNT(*) FROM promotions") == 1
    # the operator redirects; the run resumes with the new direction and promotes it
    print(C.redirect(st, "process several rows per program", reference="triton tutorial 03"))
    assert st.run()["status"] == "running"
    code = orchestrator(run, cfg, team).run()
    op = st.row("SELECT * FROM directions WHERE origin='operator'")
    assert op["successes"] >= 1
    assert st.value("SELECT COUNT(*) FROM promotions") >= 2
    best = st.row("SELECT * FROM candidates WHERE id=(SELECT best_candidate FROM runs)")
    assert best["origin"] == "attempt" and best["status"] == "promoted" and best["improvement"] == pytest.approx(5.0)
    # the escalated direction stays closed to the planner
    plan_metas = [m for r, m in team.calls if r == "planner"]
    assert all(m["state"]["directions"].get("bad-idea") != "open" for m in plan_metas[-1:])
    assert code == 0


def test_surface_violation_and_assignment_surface(tmp_path):
    cfg = demo_config(coders=2, profile=False, max_cycles=1)
    run = tmp_path / "run"
    create_run(run, cfg)

    def coder(asg):
        if asg["direction"] == "first":
            return {"solution/kernel.py": GOOD, "solution/helper.py": "X = 1\n"}   # helper not in the assignment
        return {"solution/kernel.py": GOOD, ".kernelwright/task.md": "easier"}     # outside the run surface

    team = Team(planner=lambda meta: "```json\n" + json.dumps({"assignments": [
        {"direction": "first", "hypothesis": "first idea here", "target_regime": "all",
         "edit_surface": ["solution/kernel.py"], "expected_evidence": "faster"},
        {"direction": "second", "hypothesis": "second idea here", "target_regime": "all",
         "edit_surface": ["solution/kernel.py"], "expected_evidence": "faster"}]}) + "\n```", coder=coder)
    assert orchestrator(run, cfg, team).run() == 0
    st = State(run)
    outcomes = {r["agent"]: (r["outcome"], r["detail"]) for r in st.rows("SELECT * FROM attempts")}
    assert outcomes["coder-1"][0] == "surface_violation" and "helper.py" in outcomes["coder-1"][1]
    assert outcomes["coder-2"][0] == "surface_violation" and "task.md" in outcomes["coder-2"][1]
    # nothing reached the gate beyond the baseline
    assert st.value("SELECT COUNT(*) FROM candidates") == 1


def test_planner_retry_then_success_and_failure_escalates(tmp_path):
    cfg = demo_config(coders=1, profile=False, max_cycles=1, planner_retries=1)
    run = tmp_path / "run"
    create_run(run, cfg)
    replies = iter([plan_text("x-idea", surface="tests/test_k.py"), plan_text("op-good")])
    team = Team(planner=lambda meta: next(replies))
    assert orchestrator(run, cfg, team).run() == 0
    st = State(run)
    assert team.roles().count("planner") == 2
    retry_meta = [m for r, m in team.calls if r == "planner"][1]
    assert retry_meta["retry"] == 1
    assert st.value("SELECT status FROM cycles WHERE idx=1") == "done"
    assert st.value("SELECT COUNT(*) FROM promotions") == 2

    cfg2 = demo_config(coders=1, profile=False, max_cycles=5, planner_retries=1, max_planner_failures=2)
    run2 = tmp_path / "run2"
    create_run(run2, cfg2)
    team2 = Team(planner=lambda meta: "I have no plan")
    assert orchestrator(run2, cfg2, team2).run() == 3
    st2 = State(run2)
    assert [r["status"] for r in st2.rows("SELECT status FROM cycles ORDER BY idx")] == ["failed", "failed"]
    assert team2.roles().count("planner") == 4


def test_budgets_stop_turns(tmp_path):
    # the token budget is checked before every turn: turns already started may overshoot it
    cfg = demo_config(coders=2, profile=False, max_cycles=5, max_tokens=1500)
    run = tmp_path / "run"
    create_run(run, cfg)
    team = Team(planner=lambda meta: plan_text("op-good", coders=2))
    assert orchestrator(run, cfg, team).run() == 0
    st = State(run)
    assert team.roles() == ["planner", "coder", "coder"]   # 1100 tokens < 1500 when both coders started
    assert st.value("SELECT COUNT(*) FROM cycles") == 1      # no second planning turn
    assert "tokens" in st.run()["stop_reason"]

    cfg2 = demo_config(coders=2, profile=False, max_cycles=5, max_tokens=1000)
    run2 = tmp_path / "run2"
    create_run(run2, cfg2)
    team2 = Team(planner=lambda meta: plan_text("op-good", coders=2))
    assert orchestrator(run2, cfg2, team2).run() == 0
    st2 = State(run2)
    assert team2.roles() == ["planner"]
    assert {r["outcome"] for r in st2.rows("SELECT outcome FROM attempts")} == {"budget"}

    cfg3 = demo_config(coders=1, profile=False, max_cycles=5, max_attempts=1)
    run3 = tmp_path / "run3"
    create_run(run3, cfg3)
    team3 = Team(planner=lambda meta: plan_text("op-good", coders=1))
    assert orchestrator(run3, cfg3, team3).run() == 0
    assert team3.roles() == ["planner", "coder"]
    assert "attempts" in State(run3).run()["stop_reason"]


def test_invalidate_falls_back_and_reports(tmp_path):
    from kernelwright.workflow.report import write_run_report

    cfg = demo_config(coders=1, profile=False, max_cycles=2)
    run = tmp_path / "run"
    create_run(run, cfg)
    faster = iter(["GOOD", "GOOD GOOD"])

    def coder(asg):
        return {"solution/kernel.py": "def run(*a):\n    pass  # " + next(faster) + "\n"}

    def lat(src):
        return 1.0 if "GOOD GOOD" in src else 2.0 if "GOOD" in src else 10.0

    team = Team(planner=lambda meta: plan_text(f"op-step-{meta['cycle']}"), coder=coder)
    assert orchestrator(run, cfg, team, gate=FakeGate(lat)).run() == 0
    st = State(run)
    promos = [r["candidate_id"] for r in st.rows("SELECT candidate_id FROM promotions ORDER BY id")]
    assert len(promos) == 3
    assert st.run()["best_candidate"] == promos[-1]
    print(C.invalidate(st, f"c{promos[-1]}", "looks wrong"))
    assert st.run()["best_candidate"] == promos[-2]
    with pytest.raises(C.ConsoleError):
        C.invalidate(st, f"c{promos[-1]}")
    with pytest.raises(C.ConsoleError):
        C.invalidate(st, "c999")
    info = C.status(st)
    assert info["best"]["id"] == promos[-2]
    path = write_run_report(run)
    text = path.read_text()
    assert text.count("data:image/png;base64") >= 4 and "Candidate lineage" in text


def test_console_controls(tmp_path):
    cfg = demo_config(profile=False)
    run = tmp_path / "run"
    st = create_run(run, cfg)
    assert "paused" in C.set_control(st, "pause")
    assert st.run()["control"] == "paused"
    C.set_control(st, "resume")
    assert st.run()["control"] == "active"
    C.set_control(st, "stop")
    assert st.run()["control"] == "stopped"
    C.note(st, "try fewer launches")
    assert "try fewer launches" in [n["text"] for n in st.rows("SELECT text FROM notes")]
    msg = C.redirect(st, "Use a 2-D block!", name="two-d")
    assert "two-d" in msg
    assert "two-d-2" in C.redirect(st, "again", name="two-d")
    with pytest.raises(C.ConsoleError):
        C.redirect(st, "x", name="Bad Name")
    with pytest.raises(C.ConsoleError):
        C.redirect(st, "x", reopen="nope")
    assert st.value("SELECT COUNT(*) FROM operator_events") == 6


def test_stop_while_running_then_resume(tmp_path):
    """The operator stops a live run (here: during the planner's turn); the orchestrator
    finishes the running step and exits; optimize --resume continues with the same attempts."""
    cfg = demo_config(coders=1, profile=False, max_cycles=1)
    run = tmp_path / "run"
    st = create_run(run, cfg)

    def planner(meta):
        C.set_control(State(run), "stop")
        return plan_text("op-good")

    team = Team(planner=planner)
    assert orchestrator(run, cfg, team).run() == 0
    assert team.roles() == ["planner"]
    assert st.run()["status"] == "stopped"
    pending = [dict(r) for r in st.rows("SELECT id, status FROM attempts")]
    assert pending == [{"id": 1, "status": "pending"}]
    team2 = Team(planner=lambda meta: pytest.fail("the plan was already made"))
    assert orchestrator(run, cfg, team2).run() == 0
    assert team2.roles() == ["coder"]
    assert [dict(r) for r in st.rows("SELECT id, status FROM attempts")] == [{"id": 1, "status": "passed"}]
    assert st.run()["status"] == "finished"


def test_a_paused_run_without_operator_waits_exits_and_resumes(tmp_path):
    cfg = demo_config(coders=1, profile=False, max_cycles=2)
    run = tmp_path / "run"
    create_run(run, cfg)
    st = State(run)
    C.set_control(st, "pause")
    said, codes = [], []
    worker = threading.Thread(target=lambda: codes.append(orchestrator(run, cfg, Team(), log=said.append).run()),
                              daemon=True)
    worker.start()
    worker.join(60)
    assert codes == [3]                                 # paused, nothing in flight, wait_for_operator = false
    assert st.run()["status"] == "paused"
    assert any("kernelwright run resume" in m for m in said)
    assert st.value("SELECT COUNT(*) FROM attempts") == 0
    C.set_control(st, "resume")
    assert orchestrator(run, cfg, Team()).run() == 0
    assert st.value("SELECT COUNT(*) FROM attempts") >= 1
