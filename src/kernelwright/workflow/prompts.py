"""Role prompts, turn prompts and the context files written into a worktree before a turn.

Everything here is a pure function of data read from the state by the orchestrator: the same
state gives the same prompt (useful for scripted agents and for resuming a run).
"""

from __future__ import annotations

import json
from typing import Any, Dict, List, Optional

from kernelwright.workflow.roles import (
    CODER_SCHEMA_HINT, PLAN_SCHEMA_HINT, RESEARCH_SCHEMA_HINT, SYNTHESIS_SCHEMA_HINT,
)

SKILLS_NOTE = ("Skills for this run are in .kernelwright/skills/ (read 00-how-a-turn-works.md first, and "
               "06-anti-hacking.md before writing code). The task is in .kernelwright/task.md; this turn's "
               "context is in .kernelwright/context/.")

ROLE_PROMPTS = {
    "planner": """You are the Planner of a kernel optimisation team run by kernelwright.
You read the current best kernel, its profile, the run history and the failed directions, and you issue a few
bounded assignments for the coders. Each assignment names one direction (a short slug), one hypothesis, the
target regime, the files a coder may edit (kernel sources under solution/ only) and the evidence that would
confirm it. Prefer directions the profile supports; after repeated failures switch to a structurally
different idea instead of tweaking. You do not write code and you do not decide promotions: the gate does.
{skills}
This is one bounded turn: read, decide, reply with the JSON plan. Never wait or poll.""",
    "coder": """You are a Coder in a kernel optimisation team run by kernelwright.
You make ONE bounded attempt at the assignment in .kernelwright/context/assignment.md, editing only the files
it allows (kernel sources under solution/). Your working directory is your own git worktree. Implement the
idea, check it with the quick gate command, fix what breaks, and stop. Do not edit anything else: the
orchestrator diffs your worktree and rejects any change outside the allowed files. Only the orchestrator's own
gate evaluation counts; report honestly.
{skills}
This is one bounded turn. Never wait for other agents. End with the JSON report.""",
    "synthesizer": """You are the Synthesizer of a kernel optimisation team run by kernelwright.
Several coders' attempts passed the gate's check this cycle. Their diffs and check numbers are in
.kernelwright/context/attempts/. Select the most promising one, or merge complementary changes into
solution/ in your worktree (which holds the current best) when they touch different parts of the kernel.
You cannot promote anything: the gate's final evaluation decides.
{skills}
This is one bounded turn. End with the JSON decision.""",
    "researcher": """You are the Researcher of a kernel optimisation team run by kernelwright.
A search direction has stalled: several attempts failed. Read the failures in .kernelwright/context/ and
produce a short brief: what is likely wrong, which known techniques apply (label each idea with its
provenance: local files, network sources, or both), and concrete next steps for a coder.
{skills}
This is one bounded turn: do not write kernel code. End with the JSON brief.""",
}


def role_prompt(role: str) -> str:
    return ROLE_PROMPTS[role].format(skills=SKILLS_NOTE)


# -- task -----------------------------------------------------------------------------------
def _strict_line(builtin) -> str:
    """The task's sentence on the strict rule (docs/gate.md, section 2a), or '' without one."""
    strict = builtin.tolerance.strict
    if strict is None:
        return ""
    if builtin.checker == "topk_indices":
        return (f"Strict rule, judged beside it: the relative L2 error of the sorted recomputed scores at most "
                f"{strict.max_rel_l2:g} over all rows and {strict.max_row_rel_l2:g} per batch row; a pass needs both rules.")
    rows = (f", and at most {strict.max_row_rel_l2:g} for its worst row (the first {strict.row_axes} "
            "dimension(s) index rows)") if strict.max_row_rel_l2 is not None else ""
    return (f"Strict rule, judged beside it: every floating-point output's relative L2 error ||x-y||/||y|| at most "
            f"{strict.max_rel_l2:g}{rows}; a pass needs both rules.")


def task_md(builtin, quick: bool, device: str, surface: List[str]) -> str:
    """``.kernelwright/task.md``: definition, reference, workloads, tolerance, commands."""
    d = builtin.definition
    spec = json.loads(d.model_dump_json(exclude={"reference"}))
    rows = []
    for w in builtin.public_workloads():
        axes = d.axis_values(w.axes)
        rows.append(f"| `{w.uuid[:18]}` | {json.dumps(dict(w.axes))} | {builtin.regime(axes)} |")
    tol = builtin.tolerance
    flags = " --device cpu --quick" if device == "cpu" else ""
    return "\n".join([
        f"# Task: make `{d.name}` fast",
        "",
        f"{d.description or ''}",
        "",
        "## Definition (FlashInfer-Trace)",
        "```json", json.dumps(spec, indent=1), "```",
        "",
        "## Reference (the ground truth; plain PyTorch)",
        "```python", d.reference.strip(), "```",
        "",
        f"## Public workloads ({len(rows)}; a held-out split is also run at promotion)",
        "| workload | var axes | regime |", "|---|---|---|", *rows,
        "",
        f"Regimes: {', '.join(builtin.regimes_order) or 'all'}.",
        f"Tolerance: atol {tol.atol:g}, rtol {tol.rtol:g}, required matched ratio {tol.required_matched_ratio:g} "
        f"(checker: {builtin.checker}).",
        _strict_line(builtin),
        "",
        "## Calling convention",
        "The entry point named in solution/manifest.json is called as `run(*inputs, *outputs)` "
        "(destination-passing style: outputs preallocated, write into them) unless the manifest says otherwise. "
        "Inputs arrive in the order listed above; scalar inputs are Python numbers.",
        "",
        "## What you may edit",
        "Only these files (globs, relative to the worktree root): " + ", ".join(f"`{s}`" for s in surface)
        + ". Never `solution/manifest.json`, `.kernelwright/`, tests or anything else.",
        "",
        "## Commands",
        f"- quick check: `kernelwright eval solution{flags} --out .kernelwright/scratch/eval`",
        f"- profile: `kernelwright profile solution -d {builtin.base_name}"
        f"{' --quick --device cpu' if device == 'cpu' else ''}`",
        "",
        f"Device of this run: {device}{' (Triton through the interpreter: TRITON_INTERPRET=1)' if device == 'cpu' else ''}.",
        "",
    ])


# -- context files ---------------------------------------------------------------------------
def _us(ms: Optional[float]) -> str:
    return "-" if ms is None else f"{ms * 1e3:.1f}"


def best_md(best: Optional[Dict[str, Any]], start: Optional[Dict[str, Any]]) -> str:
    if best is None:
        return "# Current best\n\nNothing has passed the gate yet (the starting solution failed). " \
               "Any correct solution is an improvement.\n"
    final = best.get("final") or {}
    pub = final.get("public", {})
    lines = [f"# Current best: candidate c{best['id']} ({best['origin']})", "",
             f"- mean speedup vs reference over the public workloads: {best.get('speedup') or 0:.3f}x"]
    if start and start.get("mean_latency_ms") and best.get("mean_latency_ms"):
        lines.append(f"- mean latency {best['mean_latency_ms'] * 1e3:.1f} us "
                     f"(starting solution {start['mean_latency_ms'] * 1e3:.1f} us)")
    lines += ["- its sources are what solution/ holds in your worktree now", "",
              "| workload | regime | latency us | reference us | speedup | roofline |", "|---|---|---|---|---|---|"]
    for r in pub.get("workloads", []):
        rf = r.get("roofline_fraction")
        lines.append(f"| `{r['uuid'][:18]}` | {r['regime']} | {_us(r.get('latency_ms'))} | "
                     f"{_us(r.get('reference_latency_ms'))} | {r.get('speedup') or 0:.3f} | "
                     f"{'-' if rf is None else f'{rf:.1%}'} |")
    warnings = sorted({w for r in pub.get("workloads", []) for w in r.get("warnings", [])})
    if warnings:
        lines += ["", "Static-scan warnings on the best: " + "; ".join(warnings[:6])]
    return "\n".join(lines) + "\n"


def history_md(cycles: List[Dict[str, Any]], limit: int = 12) -> str:
    lines = ["# Run history (newest last)", ""]
    for c in cycles[-limit:]:
        base = f"c{c['base_candidate']}" if c["base_candidate"] else "the starting solution"
        lines.append(f"## cycle {c['idx']} (base {base}) - {c['status']}")
        if c.get("error"):
            lines.append(f"- planner: {c['error']}")
        for a in c.get("attempts", []):
            lines.append(f"- a{a['id']} {a['agent']} [{a['direction']}] {a['hypothesis'][:160]} -> {a['result']}")
        for f in c.get("finals", []):
            lines.append(f"- final c{f['id']}: {f['status']} {f.get('reason') or ''}")
        lines.append("")
    if len(lines) == 2:
        lines.append("No cycle has run yet.")
    return "\n".join(lines) + "\n"


def directions_md(directions: List[Dict[str, Any]]) -> str:
    lines = ["# Directions", "", "| direction | origin | status | consecutive failures | research-assisted failures |"
             " successes |", "|---|---|---|---|---|---|"]
    for d in directions:
        lines.append(f"| {d['name']} | {d['origin']} | {d['status']} | {d['failed_attempts']} | "
                     f"{d['research_failed_attempts']} | {d['successes']} |")
    for d in directions:
        if d.get("description") and d["origin"] == "operator":
            lines.append(f"\nOperator direction **{d['name']}**: {d['description']}"
                         + (f" (reference: {d['reference']})" if d.get("reference") else ""))
        if d.get("research_brief"):
            lines.append(f"\n## Research brief for {d['name']}\n\n{d['research_brief']}")
    return "\n".join(lines) + "\n"


def operator_md(notes: List[Dict[str, Any]]) -> str:
    if not notes:
        return "# Operator notes\n\nNone.\n"
    return "# Operator notes (newest last)\n\n" + "\n".join(f"- {n['text']}" for n in notes[-20:]) + "\n"


def assignment_md(a: Dict[str, Any], agent: str, quick_cmd: str) -> str:
    lines = [f"# Assignment for {agent} (attempt a{a['attempt_id']}, cycle {a['cycle_idx']})", "",
             f"- direction: **{a['direction']}**", f"- hypothesis: {a['hypothesis']}",
             f"- target regime: {a['target_regime']}", f"- you may edit: {', '.join(a['edit_surface'])}",
             f"- expected evidence: {a['expected_evidence']}"]
    if a.get("instructions"):
        lines.append(f"- instructions: {a['instructions']}")
    if a.get("research_brief"):
        lines += ["", "## Research brief for this direction", a["research_brief"]]
    lines += ["", f"Quick check: `{quick_cmd}`", "",
              "One bounded attempt: implement, check, fix, stop. Reply with:", "```json", CODER_SCHEMA_HINT, "```"]
    return "\n".join(lines) + "\n"


# -- turn prompts ----------------------------------------------------------------------------
def planner_prompt(cycle_idx: int, n_assign: int, coders: int, regimes: List[str], blocked: Dict[str, str],
                   context: Dict[str, str], surface: List[str]) -> str:
    blocked_lines = "\n".join(f"- {k}: {v}" for k, v in blocked.items()) or "- none"
    return "\n".join([
        f"Cycle {cycle_idx}: plan at most {n_assign} assignment(s) for {coders} coder(s).",
        "",
        context.get("best.md", ""),
        context.get("profile.md", ""),
        context.get("directions.md", ""),
        context.get("history.md", ""),
        context.get("operator.md", ""),
        "Directions you may not use now:", blocked_lines, "",
        f"Regimes: {', '.join(regimes) or 'all'} (or all). Edit surfaces must stay inside: {', '.join(surface)}"
        " (never manifest.json).",
        "",
        "Reply with exactly one JSON object in a ```json fence:", "```json", PLAN_SCHEMA_HINT, "```",
    ])


def plan_retry_prompt(problems: List[str]) -> str:
    return ("Your plan was not accepted:\n" + "\n".join(f"- {p}" for p in problems)
            + "\nReply again with only the corrected JSON object in a ```json fence.")


def coder_prompt(assignment_text: str) -> str:
    return assignment_text + "\nThe assignment is also in .kernelwright/context/assignment.md."


def synthesizer_prompt(cycle_idx: int, attempts: List[Dict[str, Any]]) -> str:
    lines = [f"Cycle {cycle_idx}: {len(attempts)} attempts passed the gate's check. Your worktree holds the current best.",
             ""]
    for a in attempts:
        lines.append(f"- a{a['id']} by {a['agent']} [{a['direction']}]: check mean latency "
                     f"{_us(a.get('check_mean_ms'))} us, ratio vs best {a.get('check_ratio') or 0:.3f}; "
                     f"diff in .kernelwright/context/attempts/a{a['id']}.patch; coder says: {a.get('report', '')[:300]}")
    lines += ["", "Select one, or merge several into solution/ (keep the edit surface: kernel sources only).",
              "Reply with one JSON object in a ```json fence:", "```json", SYNTHESIS_SCHEMA_HINT, "```"]
    return "\n".join(lines)


def researcher_prompt(direction: Dict[str, Any], failures: List[Dict[str, Any]]) -> str:
    lines = [f"Direction **{direction['name']}** has stalled after {direction['failed_attempts']} failed attempts.",
             f"Description: {direction.get('description') or '-'}", "", "Failed attempts:"]
    for f in failures[-8:]:
        lines.append(f"- a{f['id']}: {f['hypothesis'][:200]} -> {f['result']}")
    lines += ["", "The current best, its profile and the history are in .kernelwright/context/.",
              "Reply with one JSON object in a ```json fence:", "```json", RESEARCH_SCHEMA_HINT, "```"]
    return "\n".join(lines)
