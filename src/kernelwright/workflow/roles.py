"""The structured replies of the roles, and how they are parsed and validated.

Agents answer in prose with one JSON object (preferably in a ```json fence); the orchestrator
takes the last JSON object of the reply and validates it with pydantic plus the run's rules.
A Planner reply that fails is sent back once per retry with the list of problems (bounded by
``planner_retries``).  Nothing an agent writes decides a promotion: these replies only steer
which attempts are made and which passing attempt goes to the gate first.
"""

from __future__ import annotations

import json
import re
from typing import Any, Dict, List, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from kernelwright.workflow.worktrees import surface_is_within

SLUG = re.compile(r"^[a-z0-9][a-z0-9-]{1,47}$")


class ReplyError(ValueError):
    """A reply is not valid; ``problems`` lists why (each one line)."""

    def __init__(self, problems: List[str]):
        self.problems = problems
        super().__init__("; ".join(problems))


def extract_json(text: str) -> Dict[str, Any]:
    """The last JSON object in ``text`` (a ```json fenced block preferred).  Raises ReplyError."""
    fences = re.findall(r"```(?:json)?\s*(\{.*?\})\s*```", text or "", flags=re.S)
    for block in reversed(fences):
        try:
            obj = json.loads(block)
            if isinstance(obj, dict):
                return obj
        except json.JSONDecodeError:
            continue
    decoder = json.JSONDecoder()
    best: Optional[Dict[str, Any]] = None
    pos, text = 0, text or ""
    while True:
        pos = text.find("{", pos)
        if pos < 0:
            break
        try:
            obj, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            pos += 1
            continue
        if isinstance(obj, dict):
            best = obj  # keep the last top-level object
        pos = end
    if best is None:
        raise ReplyError(["no JSON object found in the reply"])
    return best


def _pyd_problems(exc: ValidationError) -> List[str]:
    out = []
    for e in exc.errors()[:8]:
        where = ".".join(str(p) for p in e.get("loc", ())) or "reply"
        out.append(f"{where}: {e.get('msg')}")
    return out


# -- Planner --------------------------------------------------------------------------------
class AssignmentSpec(BaseModel):
    """One bounded assignment: a hypothesis in a named direction for a target regime, the files
    a coder may change, and the evidence that would confirm it."""

    model_config = ConfigDict(extra="ignore")

    direction: str
    hypothesis: str = Field(min_length=10)
    target_regime: str = Field(min_length=1)
    edit_surface: List[str] = Field(min_length=1)
    expected_evidence: str = Field(min_length=5)
    instructions: str = ""
    coders: int = Field(default=1, ge=1)

    @field_validator("direction")
    @classmethod
    def _slug(cls, v: str) -> str:
        v = v.strip().lower()
        if not SLUG.match(v):
            raise ValueError("must be a short slug: lowercase letters, digits and '-', 2-48 characters")
        return v


class Plan(BaseModel):
    model_config = ConfigDict(extra="ignore")

    summary: str = ""
    assignments: List[AssignmentSpec] = Field(default_factory=list)


def parse_plan(text: str, *, max_assignments: int, max_coders: int, run_surface: List[str],
               regimes: List[str], blocked: Dict[str, str]) -> Plan:
    """Validate a Planner reply.  ``blocked`` maps direction name -> why it may not be used now.
    Raises ReplyError listing every problem."""
    obj = extract_json(text)
    try:
        plan = Plan.model_validate(obj)
    except ValidationError as exc:
        raise ReplyError(_pyd_problems(exc)) from None
    problems = []
    if not plan.assignments:
        problems.append("assignments: at least one assignment is required")
    if len(plan.assignments) > max_assignments:
        problems.append(f"assignments: at most {max_assignments} per cycle, got {len(plan.assignments)}")
    allowed_regimes = set(regimes) | {"all"}
    for i, a in enumerate(plan.assignments):
        if a.direction in blocked:
            problems.append(f"assignments.{i}.direction: {a.direction!r} {blocked[a.direction]}")
        if a.target_regime not in allowed_regimes:
            problems.append(f"assignments.{i}.target_regime: {a.target_regime!r} is not one of {sorted(allowed_regimes)}")
        bad = [g for g in a.edit_surface if not surface_is_within(g, run_surface)]
        if bad:
            problems.append(f"assignments.{i}.edit_surface: {bad} is outside the kernel sources "
                            f"(allowed: {run_surface})")
        if a.coders > max_coders:
            problems.append(f"assignments.{i}.coders: at most {max_coders}")
    if problems:
        raise ReplyError(problems)
    return plan


PLAN_SCHEMA_HINT = """{
  "summary": "what the current best and its profile say, in two or three sentences",
  "assignments": [
    {
      "direction": "short-slug-naming-the-idea",
      "hypothesis": "what to change and why it should be faster (cite the profile)",
      "target_regime": "one of the regimes, or all",
      "edit_surface": ["solution/kernel.py"],
      "expected_evidence": "what the gate's numbers should show if the hypothesis holds",
      "instructions": "concrete guidance for the coder (optional)",
      "coders": 1
    }
  ]
}"""


# -- Synthesizer ----------------------------------------------------------------------------
class SynthesisDecision(BaseModel):
    """``select`` one passing attempt, or ``merge`` several (the merged code is what the
    synthesizer left in its worktree)."""

    model_config = ConfigDict(extra="ignore")

    decision: Literal["select", "merge"]
    attempt: Optional[int] = None
    attempts: List[int] = Field(default_factory=list)
    rationale: str = ""


def parse_synthesis(text: str, passed_attempts: List[int]) -> SynthesisDecision:
    """Raises ReplyError when the decision names attempts that did not pass."""
    obj = extract_json(text)
    try:
        d = SynthesisDecision.model_validate(obj)
    except ValidationError as exc:
        raise ReplyError(_pyd_problems(exc)) from None
    if d.decision == "select" and d.attempt not in passed_attempts:
        raise ReplyError([f"attempt: {d.attempt} is not one of the passing attempts {passed_attempts}"])
    if d.decision == "merge":
        if len(d.attempts) < 2 or any(a not in passed_attempts for a in d.attempts):
            raise ReplyError([f"attempts: a merge names two or more of the passing attempts {passed_attempts}"])
    return d


SYNTHESIS_SCHEMA_HINT = """{"decision": "select", "attempt": 12, "rationale": "..."}
or, after merging the changes of several attempts into solution/ in your worktree:
{"decision": "merge", "attempts": [12, 13], "rationale": "..."}"""


# -- Researcher -----------------------------------------------------------------------------
class ResearchIdea(BaseModel):
    model_config = ConfigDict(extra="ignore")

    idea: str
    provenance: Literal["local", "network", "both"] = "local"
    reference: str = ""


class ResearchBrief(BaseModel):
    model_config = ConfigDict(extra="ignore")

    brief: str = Field(min_length=1)
    ideas: List[ResearchIdea] = Field(default_factory=list)


def parse_research(text: str) -> ResearchBrief:
    """A brief from JSON, or the whole reply as the brief when it has no JSON object."""
    try:
        obj = extract_json(text)
        return ResearchBrief.model_validate(obj)
    except (ReplyError, ValidationError):
        if text and text.strip():
            return ResearchBrief(brief=text.strip()[:8000])
        raise ReplyError(["empty research reply"]) from None


RESEARCH_SCHEMA_HINT = """{"brief": "a short markdown brief",
 "ideas": [{"idea": "...", "provenance": "local|network|both", "reference": "where it comes from"}]}"""


# -- Coder ----------------------------------------------------------------------------------
class CoderReport(BaseModel):
    """What the coder says it did (recorded, never trusted)."""

    model_config = ConfigDict(extra="ignore")

    summary: str = ""
    local_check: str = "not_run"
    notes: str = ""


def parse_coder(text: str) -> CoderReport:
    try:
        return CoderReport.model_validate(extract_json(text))
    except (ReplyError, ValidationError):
        return CoderReport(summary=(text or "").strip()[:2000])


CODER_SCHEMA_HINT = """{"summary": "what you changed and why", "local_check": "passed|failed|not_run", "notes": "anything the planner should know"}"""
