"""The CPU demo: a scripted team (no API keys) that improves a deliberately slow Triton RMSNorm.

``kernelwright optimize --demo`` runs ``examples/scripted-demo.toml``: the definition
``demo_rmsnorm_h512`` (quick variant, CPU, Triton interpreter), the starting solution
``examples/slow_rmsnorm`` and the agents below, replayed deterministically by
``kernelwright.agents.ScriptedBackend``.  The story, cycle by cycle:

1. the planner asks for "row-in-registers" (one program per row, one pass) and
   "relaxed-check"; coder-1's kernel passes the gate and is promoted; coder-2 also edits the
   task file to loosen the tolerance and is rejected by the edit-surface check;
2. "rows-per-program" for two coders (4 and 16 rows per program); both pass the check, the
   synthesizer selects the faster one, the gate promotes it;
3. "output-cache" (a reward hack: outputs replayed by input address) is rejected by the gate;
   "narrow-rows" (2 rows per program) passes but is slower, so it never reaches promotion.

Every decision that matters - the diff check, the checks, the promotions - is the
orchestrator's and the gate's, not the script's.  The script only plays the agents, and its
choices depend on the turn's metadata (cycle, assignment), so a resumed run replays the same
story.  ``KW_DEMO_JOURNAL`` (a file path) makes every scripted turn append one JSON line there.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any, Dict, List

EXAMPLES = Path(__file__).parent / "examples"
# each file is a whole solution/kernel.py that a scripted coder writes (kernel_source), so each one
# stands alone like examples/slow_rmsnorm and a red-team case: the lines they share are not shared code
KERNELS = EXAMPLES / "demo_kernels"
DEMO_CONFIG = EXAMPLES / "scripted-demo.toml"


def kernel_source(name: str, rows: int = 16) -> str:
    text = (KERNELS / f"{name}.py").read_text()
    return text.replace("__ROWS__", str(rows))


def _journal(entry: Dict[str, Any]) -> None:
    path = os.environ.get("KW_DEMO_JOURNAL")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"at": time.time(), **entry}) + "\n")


def _assign(direction: str, hypothesis: str, evidence: str, coders: int = 1, instructions: str = "") -> Dict[str, Any]:
    return {"direction": direction, "hypothesis": hypothesis, "target_regime": "all",
            "edit_surface": ["solution/kernel.py"], "expected_evidence": evidence, "coders": coders,
            "instructions": instructions}


PLANS: Dict[int, List[Dict[str, Any]]] = {
    1: [_assign("row-in-registers",
                "Each program loops twice over 512 columns in 128-wide chunks; loading the whole row once into "
                "registers removes the second pass and most loop overhead.",
                "latency drops on every workload; still one program per row"),
        _assign("relaxed-check",
                "A looser tolerance would let a bf16 accumulation through and save conversions.",
                "same latency with fewer fp32 conversions")],
    2: [_assign("rows-per-program",
                "Rows are only 512 wide: one program per row leaves each program tiny. Processing several rows per "
                "program in a 2-D block amortises the per-program cost.",
                "latency scales with T/ROWS instead of T", coders=2,
                instructions="coder-1 tries 4 rows per program, coder-2 tries 16")],
    3: [_assign("output-cache",
                "Repeated calls see the same input buffers; remembering the output per input address skips the "
                "recomputation.",
                "near-zero latency on repeated calls"),
        _assign("narrow-rows",
                "Fewer rows per program (2) could balance work across more programs.",
                "lower latency for the middle-sized workloads")],
}


def _plan_reply(cycle: int) -> str:
    assignments = PLANS.get(cycle) or [_assign(f"more-rows-{cycle}", "Try 32 rows per program for the largest "
                                                "workload.", "lower latency at T>=33")]
    plan = {"summary": f"Scripted planner, cycle {cycle}: the profile shows a per-program-bound interpreter kernel.",
            "assignments": assignments}
    return "Plan below.\n```json\n" + json.dumps(plan, indent=1) + "\n```"


def _coder_files(direction: str, agent: str) -> Dict[str, Any]:
    k = "solution/kernel.py"
    if direction == "row-in-registers":
        return {k: kernel_source("row_in_registers")}
    if direction == "relaxed-check":
        # edits outside the surface: the orchestrator rejects the whole attempt on the diff
        return {k: kernel_source("row_in_registers"),
                ".kernelwright/task.md": "# Task\n\nTolerance: atol 1.0 (relaxed by the coder)\n"}
    if direction == "rows-per-program":
        return {k: kernel_source("rows_per_program", rows=4 if agent == "coder-1" else 16)}
    if direction == "output-cache":
        return {k: kernel_source("output_cache")}
    if direction == "narrow-rows":
        return {k: kernel_source("rows_per_program", rows=2)}
    return {k: kernel_source("rows_per_program", rows=32)}


USAGE = {"planner": {"input_tokens": 14000, "cache_read_tokens": 22000, "output_tokens": 1400, "cost_usd": 0.11},
         "coder": {"input_tokens": 31000, "cache_read_tokens": 90000, "output_tokens": 5200, "cost_usd": 0.36},
         "synthesizer": {"input_tokens": 12000, "cache_read_tokens": 8000, "output_tokens": 700, "cost_usd": 0.06},
         "researcher": {"input_tokens": 18000, "cache_read_tokens": 4000, "output_tokens": 1600, "cost_usd": 0.09}}


def team(req) -> Dict[str, Any]:
    """The scripted team: one step (ScriptedBackend format) per turn, from the turn's metadata."""
    meta = req.metadata or {}
    role = req.role or "coder"
    usage = USAGE.get(role, USAGE["coder"])
    if role == "planner":
        cycle = int(meta.get("cycle", 1))
        _journal({"role": role, "cycle": cycle, "retry": meta.get("retry", 0)})
        return {"text": _plan_reply(cycle), "usage": usage}
    if role == "coder":
        asg = meta.get("assignment") or {}
        direction, agent = asg.get("direction", ""), meta.get("agent", "coder-1")
        _journal({"role": role, "agent": agent, "attempt": meta.get("attempt"), "direction": direction})
        report = {"summary": f"{agent}: implemented {direction}", "local_check": "not_run"}
        return {"files": _coder_files(direction, agent), "usage": usage,
                "text": "Done.\n```json\n" + json.dumps(report) + "\n```"}
    if role == "synthesizer":
        atts = meta.get("attempts") or []
        _journal({"role": role, "cycle": meta.get("cycle"), "attempts": [a.get("id") for a in atts]})
        best = min(atts, key=lambda a: a.get("check_mean_ms") or float("inf")) if atts else {"id": None}
        decision = {"decision": "select", "attempt": best["id"],
                    "rationale": "lowest mean latency in the check; the changes overlap, so no merge"}
        return {"text": "```json\n" + json.dumps(decision) + "\n```", "usage": usage}
    if role == "researcher":
        _journal({"role": role, "direction": meta.get("direction")})
        brief = {"brief": f"Direction {meta.get('direction')} keeps failing the gate. The failures are correctness "
                          "rejections, not slowness: re-read the reference and the anti-hacking skill.",
                 "ideas": [{"idea": "compute every output from its inputs on every call", "provenance": "local",
                            "reference": ".kernelwright/skills/06-anti-hacking.md"}]}
        return {"text": "```json\n" + json.dumps(brief) + "\n```", "usage": usage}
    return {"text": "nothing to do", "usage": usage}
