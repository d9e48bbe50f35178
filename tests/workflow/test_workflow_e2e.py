"""End to end on CPU with the real gate: scripted agents improve a deliberately slow Triton
RMSNorm (demo_rmsnorm_h512, quick sizes, Triton interpreter) through two promotions.

Slow (a few minutes on a small CPU machine): every check and final evaluation is a real gate
run in a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kernelwright.workflow.loop import Orchestrator
from kernelwright.workflow.report import write_run_report
from kernelwright.workflow.runs import create_run
from kernelwright.workflow.state import State

from workflow_helpers import demo_config, skip_if_sources_tampered

pytestmark = pytest.mark.slow


def test_demo_improves_through_two_promotions(tmp_path):
    cfg = demo_config(max_cycles=2)
    run = tmp_path / "run"
    create_run(run, cfg)
    lines = []
    assert Orchestrator(run, log=lines.append).run() == 0, "\n".join(lines)
    st = State(run)
    log = "\n".join(lines)
    skip_if_sources_tampered(run)
    promoted = st.rows("SELECT * FROM candidates WHERE status='promoted' AND origin!='start' ORDER BY id")
    assert len(promoted) >= 2, log
    first, second = promoted[0], promoted[1]
    # lineage: the second promotion was built on the first
    assert json.loads(second["parent_ids_json"]) == [first["id"]]
    assert second["improvement"] >= 1.02
    # the hack in cycle 1 never reached the gate: rejected on the diff
    a2 = st.row("SELECT * FROM attempts WHERE id=2")
    assert a2["outcome"] == "surface_violation" and ".kernelwright/task.md" in a2["detail"]
    # cycle 2: two passing attempts, the synthesizer picked one, the gate promoted it
    syn = json.loads(st.value("SELECT synthesis_json FROM cycles WHERE idx=2"))
    assert syn["decision"]["decision"] == "select"
    assert st.row("SELECT attempt_id FROM candidates WHERE id=?", second["id"])[0] == syn["decision"]["attempt"]
    # evidence recorded with the candidates; hidden traces are not in the run folder
    ev = Path(second["evidence_dir"])
    assert (ev / "diff.patch").read_text().strip() and list((ev / "check").rglob("*.jsonl"))
    final = json.loads(second["final_json"])
    assert final["hidden"]["total"] > 0 and final["hidden"]["passed"] == final["hidden"]["total"]
    assert not [p for p in run.rglob("*") if "hidden" in p.name.lower()]
    # the best is faster than the starting solution on every public workload it was timed on
    start = st.row("SELECT * FROM candidates WHERE origin='start'")
    if start["status"] == "promoted":
        assert second["mean_latency_ms"] < start["mean_latency_ms"]
    # profiles of the new bests, tokens by role, the report with its curves
    assert st.value("SELECT COUNT(*) FROM profiles WHERE status='done'") >= 2
    roles = {r["role"] for r in st.rows("SELECT DISTINCT role FROM turns")}
    assert roles == {"planner", "coder", "synthesizer"}
    html = write_run_report(run).read_text()
    assert html.count("data:image/png;base64") >= 5
    assert "best speedup over time" in html or "Best speedup over time" in html
    # the best branch of the run repository points at the best
    from kernelwright.workflow.worktrees import git

    assert git(run / "repo", "rev-parse", "best").strip() == second["commit_sha"] or \
        st.run()["best_candidate"] != second["id"]
