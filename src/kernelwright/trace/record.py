"""What a trace says about how it was judged, in fields that survive an upstream round trip.

(Built by the gate, ``gate/evaluate.py``; read by the reports and by anyone holding a trace.)

flashinfer-bench's loader keeps ``evaluation.log`` (a string) and ``correctness.extra`` (a dict)
but drops kernelwright's ``evaluation.gate`` block.  So every trace also carries the verdict's
terms there:

* ``correctness.extra["kernelwright"]`` (PASSED and INCORRECT_NUMERICAL traces, the statuses that
  have a correctness block): the ``judged_by`` record below;
* the first line of ``evaluation.log`` (every trace): the same record as one readable line,
  ``[kernelwright] guards=on suspicious=no checker=elementwise atol=0.01 rtol=0.01
  matched_ratio>=1 (definition default) definition=demo_rmsnorm_h512 origin=builtin``.

A SUSPICIOUS trace (``suspicious=yes(BELOW_ROOFLINE)``), an unguarded one (``guards=OFF``, from
``--fast-unsafe``) or one judged by a looser tolerance than the definition's (``LOOSER than the
definition's default``) therefore cannot pass for a clean one once upstream has loaded it.
``read(trace)`` gets the record back from either place.

The record (all plain JSON):

``checker`` the output checker; ``tolerance`` {atol, rtol, required_matched_ratio} the verdict
used; ``default_tolerance`` the definition's own; ``looser`` whether any term of ``tolerance``
is looser than the default; ``definition`` {name, origin: builtin|module|file, locator (None for
a built-in)}; ``guards`` whether the anti-hack guards ran; ``split``; ``suspicious``;
``reasons`` the gate's codes; ``rule`` which numerical rules judged (``contest+strict``, or
``contest`` with ``--contest-rule`` or for a definition without a strict rule).
"""

from __future__ import annotations

import json
from typing import Any, Dict, Optional

LOG_PREFIX = "[kernelwright] "
EXTRA_KEY = "kernelwright"


def tolerance_dict(tol) -> Dict[str, float]:
    """{atol, rtol, required_matched_ratio} of a ``definitions.Tolerance`` (or anything with them)."""
    return {"atol": tol.atol, "rtol": tol.rtol, "required_matched_ratio": tol.required_matched_ratio}


def looser(tol: Dict[str, float], default: Dict[str, float]) -> bool:
    """Whether any term of ``tol`` lets through more than ``default`` does."""
    return (tol["atol"] > default["atol"] or tol["rtol"] > default["rtol"]
            or tol["required_matched_ratio"] < default["required_matched_ratio"])


def judged_by(checker: str, tolerance: Dict[str, float], default: Dict[str, float], definition: Dict[str, Any],
              guards_on: bool, split: str, suspicious: bool, reasons, rule: Optional[str] = None) -> Dict[str, Any]:
    """The record of one trace (see the module docstring): ``tolerance`` the verdict used,
    ``default`` the definition's own, ``definition`` {name, origin, locator}, ``rule`` which
    numerical rules judged (``contest+strict`` or ``contest``, docs/gate.md)."""
    out = {"checker": checker, "tolerance": dict(tolerance), "default_tolerance": dict(default),
           "looser": looser(tolerance, default), "definition": dict(definition), "guards": bool(guards_on),
           "split": split, "suspicious": bool(suspicious), "reasons": list(reasons)}
    if rule is not None:
        out["rule"] = rule
    return out


def log_line(record: Dict[str, Any]) -> str:
    """The record as the first line of ``evaluation.log``."""
    tol = record["tolerance"]
    default = record["default_tolerance"]
    which = "LOOSER than the definition's default " + _terms(default) if record["looser"] else (
        "definition default" if tol == default else "tighter than the definition's default " + _terms(default))
    susp = "yes(" + ",".join(record["reasons"]) + ")" if record["suspicious"] else "no"
    d = record["definition"]
    where = f"{d['name']} origin={d['origin']}" + (f" locator={d['locator']}" if d.get("locator") else "")
    rule = f" rule={record['rule']}" if record.get("rule") else ""
    return (f"{LOG_PREFIX}guards={'on' if record['guards'] else 'OFF'} suspicious={susp} checker={record['checker']} "
            f"{_terms(tol)} ({which}){rule} split={record['split']} definition={where} "
            f"record={json.dumps(record, separators=(',', ':'))}")


def _terms(tol: Dict[str, float]) -> str:
    return f"atol={tol['atol']:g} rtol={tol['rtol']:g} matched_ratio>={tol['required_matched_ratio']:g}"


def read(trace) -> Optional[Dict[str, Any]]:
    """The record of a trace (ours, or one upstream loaded and wrote back): from
    ``correctness.extra`` or from the log line; None for a trace that has neither."""
    ev = getattr(trace, "evaluation", None)
    if ev is None:
        return None
    corr = getattr(ev, "correctness", None)
    extra = getattr(corr, "extra", None) or {}
    if isinstance(extra.get(EXTRA_KEY), dict):
        return extra[EXTRA_KEY]
    for line in (ev.log or "").splitlines():
        if line.startswith(LOG_PREFIX) and " record=" in line:
            try:
                return json.loads(line.split(" record=", 1)[1])
            except ValueError:
                return None
    return None
