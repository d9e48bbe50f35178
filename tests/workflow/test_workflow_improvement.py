"""`kernelwright run status` and `kernelwright run report` give a run's improvement as the same
figure and say how it is computed (issue 21: the demo run read x14.3 in one and x7.3 in the other,
because status divided two mean latencies from different evaluations while the report chained the
side-by-side ratios measured at each promotion)."""

from __future__ import annotations

import io
import re

from rich.console import Console

from kernelwright.workflow import console as C
from kernelwright.workflow import runs as V
from kernelwright.workflow.report import write_run_report
from kernelwright.workflow.runs import create_run
from kernelwright.workflow.state import State

from test_workflow_loop import Team, orchestrator, plan_text
from workflow_helpers import FakeGate, demo_config


def test_status_and_report_agree_on_the_improvement(tmp_path):
    seen = {"start": 0}

    def latency(src: str):
        if "GOOD" in src:
            return 2.0
        seen["start"] += 1      # the starting solution: 10 ms in its own evaluation, 5 ms re-timed later
        return 10.0 if seen["start"] == 1 else 5.0

    cfg = demo_config(coders=1, profile=False, max_cycles=1)
    run = tmp_path / "run"
    create_run(run, cfg)
    team = Team(planner=lambda meta: plan_text(f"op-step-{meta['cycle']}"))
    assert orchestrator(run, cfg, team, gate=FakeGate(latency)).run() == 0
    state = State(run)
    imp = V.improvement_over_start(state)
    assert imp is not None and abs(imp["value"] - 2.5) < 1e-9            # 5 ms / 2 ms, side by side
    assert imp["over"].startswith("the starting solution c")
    start, best = V.start_candidate(state), V.best(state)
    assert abs(start["mean_latency_ms"] / best["mean_latency_ms"] - 5.0) < 1e-9   # what status used to say

    info = C.status(state)
    assert info["improvement_over_start"] == imp["value"]
    out = io.StringIO()
    C.render_status(info, Console(file=out, width=200, color_system=None))
    text = out.getvalue()
    assert "x2.50 over the starting solution" in text and V.IMPROVEMENT_HOW[:60] in " ".join(text.split())
    page = write_run_report(run).read_text()
    assert re.search(r"improvement over the starting solution c\d+</td><td>x2\.50", page)
    assert V.IMPROVEMENT_HOW[:60] in page.replace("&#x27;", "'")
