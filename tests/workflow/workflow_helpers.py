"""Helpers of the workflow tests: demo configs with a light gate, fake verdicts (imported by name)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List

from kernelwright.workflow.config import load_config_file, parse_config
from kernelwright.workflow.demo import DEMO_CONFIG

FAST_GATE = {"warmup": 1, "iterations": 2, "trials": 1, "reference_iterations": 1, "graph_iterations": 0,
             "cupti_tracing": False, "timeout_s": 900}


def demo_config(**overrides: Any):
    data = load_config_file(DEMO_CONFIG)
    data["gate"] = dict(FAST_GATE)
    return parse_config(data, overrides)


def verdict(mode: str, passed: bool, latency_ms: float = 1.0, reason: str = "TOLERANCE",
            compare_ms: float | None = None) -> Dict[str, Any]:
    """A gate verdict as evaljob writes it, for tests that replace the gate."""
    uuids = ["demo-rmsnorm-t1", "demo-rmsnorm-t7", "demo-rmsnorm-t33"]

    def rows(lat, ok):
        return [{"uuid": u, "axes": {"num_tokens": int(u.split("-t")[1])}, "regime": "T<=64",
                 "status": "PASSED" if ok else "INCORRECT_NUMERICAL", "passed": ok, "trusted": ok,
                 "reasons": [] if ok else [reason], "suspicious": False, "warnings": [],
                 "latency_ms": lat if ok else None, "reference_latency_ms": 0.01 if ok else None,
                 "speedup": 0.01 / lat if ok else None, "roofline_fraction": None} for u in uuids]

    def summary(lat, ok):
        r = rows(lat, ok)
        out = {"workloads": r, "total": 3, "passed": 3 if ok else 0, "trusted": 3 if ok else 0, "suspicious": 0,
               "all_passed": ok}
        if ok:
            out["mean_latency_ms"], out["speedup"] = lat, 0.01 / lat
        else:
            out["first_failure"] = {"uuid": uuids[0], "status": "INCORRECT_NUMERICAL", "reason": reason,
                                    "log_tail": "trial 0: max abs err 3.2"}
        return out

    v: Dict[str, Any] = {"ok": True, "mode": mode, "public": summary(latency_ms, passed), "seconds": 0.1}
    if compare_ms is not None:
        v["compare"] = summary(compare_ms, True)
        v["improvement"] = compare_ms / latency_ms if passed else None
    if mode == "final":
        v["hidden"] = {"total": 2, "passed": 2 if passed else 0, "reasons": [] if passed else [reason]}
        v["final_passed"] = passed
    return v


class FakeGate:
    """Replaces the gate: latency per candidate label from ``latencies`` (ms), failure for
    labels in ``failing``; records every request."""

    def __init__(self, latency_of):
        self.latency_of = latency_of
        self.requests: List[Dict[str, Any]] = []

    def __call__(self, request, lease, job_dir, timeout_s):
        self.requests.append(request)
        src = (Path(request["solution_dir"]) / "kernel.py").read_text()
        lat = self.latency_of(src)
        cmp_ms = None
        if request.get("compare_dir"):
            cmp_ms = self.latency_of((Path(request["compare_dir"]) / "kernel.py").read_text())
        if lat is None:
            return verdict(request["mode"], False)
        return verdict(request["mode"], True, lat, compare_ms=cmp_ms)



def skip_if_sources_tampered(run_dir) -> None:
    """Skip when an evaluation was rejected FILE_TAMPERED because something outside this test
    (another process working in the same checkout, e.g. the red-team suite) edited
    kernelwright's protected sources while the gate ran: nothing the test controls."""
    import pytest

    from kernelwright.workflow.state import State

    st = State(Path(run_dir))
    texts = [r[0] or "" for r in st.rows("SELECT final_json FROM candidates")]
    texts += [r[0] or "" for r in st.rows("SELECT check_json FROM attempts")]
    hits = [t for t in texts if "FILE_TAMPERED" in t and "protected files changed" in t]
    if hits:
        pytest.skip("the gate saw kernelwright's own sources change during an evaluation (another process "
                    "edits this checkout concurrently); rerun when the checkout is quiet")
