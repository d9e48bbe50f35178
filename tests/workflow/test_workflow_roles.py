"""Parsing and validating the roles' structured replies."""

from __future__ import annotations

import json

import pytest

from kernelwright.workflow import roles as R
from kernelwright.workflow.config import DEFAULT_SURFACE


def _plan(**over):
    a = {"direction": "row-in-registers", "hypothesis": "load the whole row once", "target_regime": "all",
         "edit_surface": ["solution/kernel.py"], "expected_evidence": "lower latency"}
    a.update(over)
    return {"summary": "s", "assignments": [a]}


def parse(obj, text=None, **kw):
    args = dict(max_assignments=2, max_coders=2, run_surface=DEFAULT_SURFACE, regimes=["T<=64", "T>64"], blocked={})
    args.update(kw)
    return R.parse_plan(text or ("Here:\n```json\n" + json.dumps(obj) + "\n```"), **args)


def test_extract_json_variants():
    assert R.extract_json('blah {"a": 1} more {"b": {"c": 2}} end') == {"b": {"c": 2}}
    assert R.extract_json('```json\n{"x": 1}\n```\nthen {"y": 2}') == {"x": 1}
    with pytest.raises(R.ReplyError):
        R.extract_json("no json here")


def test_valid_plan():
    plan = parse(_plan())
    assert plan.assignments[0].direction == "row-in-registers"


@pytest.mark.parametrize("over,needle", [
    ({"edit_surface": ["tests/test_x.py"]}, "outside the kernel sources"),
    ({"edit_surface": ["solution/manifest.json"]}, "outside the kernel sources"),
    ({"target_regime": "huge"}, "target_regime"),
    ({"direction": "Not A Slug!"}, "slug"),
    ({"hypothesis": "short"}, "hypothesis"),
    ({"coders": 5}, "coders"),
])
def test_invalid_plans(over, needle):
    with pytest.raises(R.ReplyError) as err:
        parse(_plan(**over))
    assert needle in str(err.value)


def test_too_many_and_blocked():
    obj = _plan()
    obj["assignments"] *= 3
    with pytest.raises(R.ReplyError, match="at most 2"):
        parse(obj)
    with pytest.raises(R.ReplyError, match="waiting"):
        parse(_plan(), blocked={"row-in-registers": "is waiting for a research brief"})
    with pytest.raises(R.ReplyError, match="at least one"):
        parse({"assignments": []})


def test_synthesis_and_research_and_coder():
    d = R.parse_synthesis('{"decision": "select", "attempt": 4}', [3, 4])
    assert d.attempt == 4
    with pytest.raises(R.ReplyError):
        R.parse_synthesis('{"decision": "select", "attempt": 9}', [3, 4])
    with pytest.raises(R.ReplyError):
        R.parse_synthesis('{"decision": "merge", "attempts": [3]}', [3, 4])
    assert R.parse_research("plain prose brief").brief == "plain prose brief"
    assert R.parse_research('{"brief": "b", "ideas": [{"idea": "i", "provenance": "network"}]}').ideas[0].provenance == "network"
    assert R.parse_coder("did things").summary == "did things"
