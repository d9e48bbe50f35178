"""The orchestrator's own gate evaluations, each in a subprocess on a leased device.

``run_evaluation(request, lease, ...)`` runs ``python -m kernelwright.workflow.evaljob REQ OUT``
with ``CUDA_VISIBLE_DEVICES`` set to the leased GPU (``TRITON_INTERPRET=1`` on CPU).  The child
uses the gate's public API (``kernelwright.gate.bench.run_bench``) exactly as ``kernelwright
eval`` does, and writes a compact JSON verdict:

* ``check``: the candidate on the public workloads (the first ``check_limit`` of them), with
  the current best interleaved on the same inputs with the same timer (``compare_dir``), so
  that the ratio between them does not depend on how busy the machine is;
* ``final`` (``kernelwright eval --final`` semantics): the same on every public workload; then,
  when the public split passed, the candidate alone on the hidden split.  Hidden traces are written to a
  temporary folder outside the run and deleted: only pass counts and reason codes come back.

An agent's own claims are never read: the verdict is what this module measured.  A result file
that already exists for the same request is reused (a run killed after the evaluation but
before its commit does not evaluate twice).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from kernelwright.workflow.leases import Lease

# the codes a verdict carries beside the gate's reason codes (``guards``; this module stays torch-free)
SUSPICIOUS = "SUSPICIOUS"                        # passed, but the gate marked the trace suspicious
NOT_RUN_PUBLIC_FAILED = "NOT_RUN_PUBLIC_FAILED"  # the hidden split did not run: the public split failed


def request_key(request: Dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:16]


def device_env(lease: Optional[Lease]) -> Dict[str, str]:
    """Environment that pins a child process to the leased device."""
    env = dict(os.environ)
    if lease is None or lease.device_type == "cpu":
        env["TRITON_INTERPRET"] = "1"
        env.setdefault("CUDA_VISIBLE_DEVICES", "")
    else:
        env["CUDA_VISIBLE_DEVICES"] = str(lease.index)
    return env


def run_child(argv: List[str], env: Dict[str, str], timeout_s: float, log_path: Path) -> Optional[int]:
    """Run a child in its own process group with a time limit (seconds); stdout and stderr go
    to ``log_path``.  Returns the exit code, or None when it was killed for the time limit."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            return proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
            proc.wait()
            return None


def _tail(path: Path, n: int = 1500) -> str:
    try:
        return path.read_text(errors="replace")[-n:]
    except OSError:
        return ""


def run_evaluation(request: Dict[str, Any], lease: Optional[Lease], job_dir: Path, timeout_s: float) -> Dict[str, Any]:
    """Evaluate in a subprocess; returns the verdict dict (``ok`` False with ``error`` when the
    evaluation itself could not run).  Never raises for what the solution does."""
    job_dir = Path(job_dir)
    job_dir.mkdir(parents=True, exist_ok=True)
    key = request_key(request)
    result_path = job_dir / f"result-{key}.json"
    if result_path.is_file():
        try:
            previous = json.loads(result_path.read_text())
            if previous.get("ok"):
                return previous
        except json.JSONDecodeError:
            pass
        result_path.unlink()
    req_path = job_dir / f"request-{key}.json"
    req_path.write_text(json.dumps(request, indent=1))
    log_path = job_dir / f"eval-{key}.log"
    started = time.time()
    code = run_child([sys.executable, "-m", "kernelwright.workflow.evaljob", str(req_path), str(result_path)],
                     device_env(lease), timeout_s, log_path)
    if result_path.is_file():
        return json.loads(result_path.read_text())
    why = "timed out" if code is None else f"exited with {code}"
    return {"ok": False, "error": f"evaluation {why} after {time.time() - started:.0f}s: {_tail(log_path, 600)}",
            "seconds": time.time() - started}


# -- child side -----------------------------------------------------------------------------
def _watch_parent() -> None:
    parent = os.getppid()

    def loop() -> None:
        while True:
            time.sleep(1.0)
            if os.getppid() != parent:
                os._exit(3)

    threading.Thread(target=loop, daemon=True, name="kw-watch-parent").start()


def _gate_config(device: str, quick: bool, gate: Dict[str, Any]):
    from kernelwright.gate.evaluate import GateConfig

    keys = ("warmup", "iterations", "trials", "reference_iterations", "graph_iterations")
    counts = {k: int(gate[k]) for k in keys if gate.get(k) is not None}
    if gate.get("cupti_tracing") is not None:
        counts["cupti_tracing"] = bool(gate["cupti_tracing"])
    return GateConfig.preset(device, quick, **counts)


def _record(builtin, trace) -> Dict[str, Any]:
    ev = trace.evaluation
    perf = ev.performance
    gate = ev.gate
    rec = {"uuid": trace.workload.uuid, "axes": dict(trace.workload.axes),
           "regime": builtin.regime(builtin.definition.axis_values(trace.workload.axes)),
           "status": ev.status.value, "passed": trace.passed, "trusted": trace.trusted_pass,
           "reasons": list(gate.reasons) if gate else [], "suspicious": bool(gate and gate.suspicious),
           "warnings": list(gate.warnings[:6]) if gate else [],
           "latency_ms": perf.latency_ms if perf else None,
           "reference_latency_ms": perf.reference_latency_ms if perf else None,
           "speedup": perf.speedup_factor if perf else None,
           "roofline_fraction": gate.roofline_fraction if gate else None}
    if not trace.passed:
        rec["log_tail"] = (ev.log or "")[-1500:]
    return rec


def _summary(records: List[Dict[str, Any]]) -> Dict[str, Any]:
    passed = [r for r in records if r["trusted"]]
    out = {"workloads": records, "total": len(records), "passed": sum(1 for r in records if r["passed"]),
           "trusted": len(passed), "suspicious": sum(1 for r in records if r["suspicious"]),
           "all_passed": bool(records) and len(passed) == len(records)}
    if out["all_passed"]:
        out["mean_latency_ms"] = sum(r["latency_ms"] for r in records) / len(records)
        out["speedup"] = sum(r["speedup"] for r in records) / len(records)
    first_bad = next((r for r in records if not r["trusted"]), None)
    if first_bad is not None:
        reason = first_bad["reasons"][0] if first_bad["reasons"] else first_bad["status"]
        if first_bad["passed"] and first_bad["suspicious"]:
            reason = SUSPICIOUS
        out["first_failure"] = {"uuid": first_bad["uuid"], "status": first_bad["status"], "reason": reason,
                                "log_tail": first_bad.get("log_tail", "")}
    return out


def geomean_ratio(best: List[Dict[str, Any]], cand: List[Dict[str, Any]]) -> Optional[float]:
    """geomean over common workloads of best latency / candidate latency (>1: candidate faster)."""
    b = {r["uuid"]: r["latency_ms"] for r in best if r.get("latency_ms")}
    ratios = [b[r["uuid"]] / r["latency_ms"] for r in cand if r.get("latency_ms") and r["uuid"] in b]
    if not ratios:
        return None
    return math.exp(sum(math.log(x) for x in ratios) / len(ratios))


def evaluate_request(request: Dict[str, Any]) -> Dict[str, Any]:
    """Child side: run the gate as the request says; returns the verdict dict."""
    from dataclasses import replace

    from kernelwright import definitions
    from kernelwright.gate.bench import BenchPlan, Candidate, run_bench
    from kernelwright.solutions import load_solution_folder

    started = time.time()
    device = "cpu" if request["device"] == "cpu" else "cuda"
    builtin = definitions.resolve(request["definition"])
    builtin = builtin.quick_if(bool(request.get("quick")))
    cfg = _gate_config(device, bool(request.get("quick")), request.get("gate") or {})
    out = Path(request["out"])
    sol = load_solution_folder(Path(request["solution_dir"]))
    sol = sol.model_copy(update={"name": request["label"]})
    workloads = builtin.public_workloads()
    if request["mode"] == "check" and request.get("gate", {}).get("check_limit"):
        workloads = workloads[: int(request["gate"]["check_limit"])]
    cands = [Candidate(sol, request["label"])]
    if request.get("compare_dir"):
        best = load_solution_folder(Path(request["compare_dir"])).model_copy(update={"name": request["compare_label"]})
        cands.append(Candidate(best, request["compare_label"]))
    if request.get("baselines") and device == "cuda":
        cands += _baseline_candidates(builtin.base_name)
    result = run_bench([BenchPlan(builtin, workloads, cands)], cfg, out)
    traces = result.traces.get(builtin.name, [])
    by_label: Dict[str, List[Dict[str, Any]]] = {}
    for t in traces:
        by_label.setdefault(t.solution, []).append(_record(builtin, t))
    verdict: Dict[str, Any] = {"ok": True, "mode": request["mode"], "definition": builtin.name,
                               "public": _summary(by_label.get(request["label"], []))}
    if request.get("compare_dir"):
        verdict["compare"] = _summary(by_label.get(request["compare_label"], []))
        verdict["improvement"] = geomean_ratio(verdict["compare"]["workloads"], verdict["public"]["workloads"])
    others = {k: v for k, v in by_label.items() if k not in (request["label"], request.get("compare_label"))}
    if others:
        verdict["baselines"] = {k: _summary(v) for k, v in others.items()}
    if request["mode"] == "final":
        if verdict["public"]["all_passed"]:
            from kernelwright.gate.hidden import hidden_salt

            hcfg = replace(cfg, split="hidden", salt=hidden_salt())
            hidden = builtin.hidden_workloads(hcfg.salt)
            with tempfile.TemporaryDirectory(prefix="kw-hidden-") as tmp:
                hres = run_bench([BenchPlan(builtin, hidden, [Candidate(sol, request["label"])])], hcfg, Path(tmp))
            htraces = hres.traces.get(builtin.name, [])
            reasons = sorted({(t.evaluation.gate.reasons[0] if t.evaluation.gate and t.evaluation.gate.reasons
                               else (SUSPICIOUS if t.passed else t.evaluation.status.value))
                              for t in htraces if not t.trusted_pass})
            verdict["hidden"] = {"total": len(htraces), "passed": sum(1 for t in htraces if t.trusted_pass),
                                 "reasons": reasons}
        else:
            verdict["hidden"] = {"total": 0, "passed": 0, "reasons": [NOT_RUN_PUBLIC_FAILED]}
        verdict["final_passed"] = bool(verdict["public"]["all_passed"] and verdict["hidden"]["total"]
                                       and verdict["hidden"]["passed"] == verdict["hidden"]["total"])
    verdict["seconds"] = time.time() - started
    return verdict


def _baseline_candidates(definition_name: str):
    from kernelwright.gate.bench import Candidate

    try:
        from kernelwright.baselines import all_baselines
    except ImportError:
        return []
    cands = []
    for entry in all_baselines(definition_name):
        if entry.availability():
            continue
        role = "lower_bound" if entry.kind == "lower_bound" else "baseline"
        cands.append(Candidate(entry.solution, entry.label, role=role, trusted=True, prepare=entry.prepare,
                               requires_kernel=False))
    return cands


def main(argv: Optional[List[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) != 2:
        print("usage: python -m kernelwright.workflow.evaljob REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    _watch_parent()
    request = json.loads(Path(argv[0]).read_text())
    try:
        verdict = evaluate_request(request)
    except Exception as exc:  # the evaluation itself failed (bad folder, gate error): report, don't crash
        import traceback

        traceback.print_exc()
        verdict = {"ok": False, "error": f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"}
    tmp = Path(argv[1]).with_suffix(".tmp")
    tmp.write_text(json.dumps(verdict, indent=1, default=str))
    os.replace(tmp, argv[1])
    return 0


def exit_now(code: int) -> None:
    """End this child process with ``code`` once its result is written: flush stdout and stderr,
    then ``os._exit``.  A normal exit would first tear down torch and Triton, 0.6-0.8 s of CPU
    that the orchestrator waits for on every evaluation; what is torn down is this process's own
    (its workers were closed by ``run_bench``, the hidden split's folder removed)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:
            pass
    os._exit(code)


if __name__ == "__main__":
    exit_now(main())
