"""Every reason code is spelled through its constant in ``kernelwright.gate.guards``.

An AST scan of the package: a string constant equal to a reason code, outside guards.py and the
red-team case folders (which stand alone), is a bare literal that should be ``guards.<CODE>``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from kernelwright.gate import guards

SRC = Path(guards.__file__).resolve().parents[1]          # src/kernelwright

# (path relative to src/kernelwright, literal): uses of a code's spelling that are not a reason code
ALLOWED = {
    # EvaluationStatus.TIMEOUT: a trace status that happens to share the reason code's spelling
    ("trace/trace.py", "TIMEOUT"),
    # the worker session's timeout reply: {"status": "TIMEOUT", "reason": guards.TIMEOUT}
    ("gate/session.py", "TIMEOUT"),
    # the orchestrator's fallback text for a hidden-split rejection: the workflow package stays
    # torch-free, and guards imports torch
    ("workflow/jobs.py", "HIDDEN_SPLIT_FAILED"),
    # the two reasons the definitions raise are defined there and imported by guards (definitions
    # do not import the gate)
    ("definitions/base.py", "WORKLOAD_INPUT"),
    ("definitions/base.py", "REFERENCE_FAILED"),
}


def _bare_reason_literals():
    codes = set(guards.REASONS)
    found = []
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC).as_posix()
        if rel == "gate/guards.py" or rel.startswith("redteam/cases/"):
            continue
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value in codes:
                if (rel, node.value) not in ALLOWED:
                    found.append(f"{rel}:{node.lineno}: {node.value!r}")
    return found


def test_reason_codes_are_constants():
    found = _bare_reason_literals()
    assert not found, "spell these as guards.<CODE>:\n" + "\n".join(found)


def test_every_reason_code_has_a_constant():
    named = {v for k, v in vars(guards).items() if k.isupper() and isinstance(v, str) and k == v}
    assert set(guards.REASONS) <= named, set(guards.REASONS) - named
