"""Aggregate traces into the bench summary (``summary.json``).

Per definition and solution: workloads passed, the clock of the headline (device time, or eager
where a call could not be timed by device time), mean headline latency and per-regime means (µs;
with ``regime_stats`` also the achieved TB/s, TFLOP/s and speedup vs the reference per regime),
mean eager and graph-replay latency, mean speedup vs the reference, mean speedup vs each baseline
(the contest's metric: the mean over workloads of baseline latency / solution latency, over the
workloads both passed, on the headline clock of the same run), and the fraction of the roofline
reached (floor latency / measured latency; mean and minimum).  Per workload: every solution's
headline, eager and graph latency and clock, and the plot position (``x``, ``series``).  Per solution also
the numerical verdict's record (``_verdict_stats``): which rule judged, the worst strict errors
over the passing workloads and their margin to the definition's thresholds.
"""

from __future__ import annotations

import statistics
from pathlib import Path
from typing import Any, Dict, List, Mapping, Optional

from kernelwright.definitions.base import BuiltinDefinition, is_sweep
from kernelwright.trace import Trace, record


def _mean(xs: List[float]) -> Optional[float]:
    return float(statistics.mean(xs)) if xs else None


def _last_line(log: str) -> str:
    """The most telling line of an evaluation log: the last non-empty one (an exception's message),
    whole (tables print it beneath themselves, wrapped, never cut)."""
    lines = [ln.strip() for ln in (log or "").splitlines() if ln.strip() and not ln.startswith(("USDT:", "[kernelwright]"))]
    return lines[-1] if lines else ""


def failure_detail(trace: Trace) -> str:
    """The one line that says why a trace failed: the gate's ``detail`` (file and line of an
    error, a worker's exit code, a guard's finding), else the log's last line."""
    gate = trace.evaluation.gate
    return (gate.detail if gate is not None and gate.detail else None) or _last_line(trace.evaluation.log)


def judged_by_summary(traces: List[Trace]) -> Optional[Dict[str, Any]]:
    """How a solution's traces were judged (``trace.record``): the tolerance (the loosest one
    when they differ), the definition's default, whether it was looser, whether the guards ran on
    every trace, the definition's origin and locator.  None for traces without a record."""
    records = [r for r in (record.read(t) for t in traces) if r]
    if not records:
        return None
    loose = [r for r in records if r.get("looser")]
    shown = loose[0] if loose else records[0]
    return {"tolerance": shown.get("tolerance"), "default_tolerance": shown.get("default_tolerance"),
            "looser": bool(loose), "guards": all(r.get("guards", True) for r in records),
            "checker": shown.get("checker"), "definition": shown.get("definition")}


def _regime_stats(traces: List[Trace]) -> Dict[str, Any]:
    """Means over one regime's trusted passes: latency (µs), the achieved HBM bandwidth (TB/s) and
    FLOP rate (TFLOP/s) from each trace's roofline notes (the definition's bytes and FLOPs of that
    workload's inputs over the headline latency; gate/evaluate.py), and the speedup over the
    PyTorch reference (the definition's reference, timed by the gate)."""
    roof = [(t.evaluation.gate.notes or {}).get("roofline", {}) for t in traces if t.evaluation.gate]
    return {"workloads": len(traces),
            "latency_us": _mean([t.evaluation.performance.latency_ms * 1e3 for t in traces]),
            "achieved_TBps": _mean([x["achieved_TBps"] for x in roof if x.get("achieved_TBps") is not None]),
            "achieved_TFLOPs": _mean([x["achieved_TFLOPs"] for x in roof if x.get("achieved_TFLOPs") is not None]),
            "speedup_vs_reference": _mean([t.evaluation.performance.speedup_factor for t in traces
                                           if t.evaluation.performance.speedup_factor])}


def _vs_fastest_baseline(lat: Mapping[str, Mapping[str, float]], sol: str, baselines: List[str],
                         regime_of: Mapping[str, str], order: List[str]) -> Dict[str, float]:
    """Per regime: the mean over workloads of (the fastest baseline's latency / ``sol``'s), over
    the workloads where ``sol`` and at least one baseline passed (empty without baselines)."""
    out: Dict[str, float] = {}
    for r in order:
        ratios = []
        for u, mine in lat.get(sol, {}).items():
            theirs = [lat[b][u] for b in baselines if u in lat.get(b, {})]
            if regime_of[u] == r and theirs:
                ratios.append(min(theirs) / mine)
        if ratios:
            out[r] = float(statistics.mean(ratios))
    return out


def _verdict_stats(traces: List[Trace]) -> Dict[str, Any]:
    """Over the passing traces of one solution: the rules that judged them (``contest+strict`` or
    ``contest``, from ``correctness.extra.rule``), the worst strict errors per output, the strict
    thresholds, and the margins: threshold / worst error (> 1 means every workload is inside the
    bound; inf when the worst error is 0).  Traces written before the strict rule existed carry no
    strict record and count under rule ``contest (no strict record)``."""
    rules: Dict[str, int] = {}
    worst: Dict[str, Dict[str, float]] = {}
    thresholds: Optional[Dict[str, Any]] = None
    for t in traces:
        extra = (t.evaluation.correctness.extra if t.evaluation.correctness else None) or {}
        rule = extra.get("rule", "contest (no strict record)")
        rules[rule] = rules.get(rule, 0) + 1
        thresholds = extra.get("strict_thresholds") or thresholds
        for name, errs in (extra.get("strict") or {}).items():
            into = worst.setdefault(name, {})
            for key, value in errs.items():
                if value is not None:
                    into[key] = max(into.get(key, 0.0), float(value))
    margins: Dict[str, Optional[float]] = {}
    if thresholds:
        for key, bound in (("rel_l2", thresholds.get("max_rel_l2")), ("row_rel_l2", thresholds.get("max_row_rel_l2"))):
            values = [errs[key] for errs in worst.values() if key in errs]
            if bound is not None and values:
                margins[key] = bound / max(values) if max(values) > 0 else float("inf")
    return {"rules": rules, "worst_strict": worst, "strict_thresholds": thresholds, "strict_margin": margins}


def _isolation_levels(traces) -> Dict[str, int]:
    """{OS boundary level: number of traces} (``gate.notes.isolation.level``, gate/sandbox.py;
    ``unrecorded`` for traces written before the boundary existed)."""
    levels: Dict[str, int] = {}
    for t in traces:
        gate = t.evaluation.gate if t.evaluation else None
        note = (gate.notes or {}).get("isolation") if gate else None
        level = note.get("level", "unrecorded") if isinstance(note, dict) else "unrecorded"
        levels[level] = levels.get(level, 0) + 1
    return levels


def summarize(traces: Mapping[str, List[Trace]], builtins: Mapping[str, BuiltinDefinition],
              roles: Mapping[str, Dict[str, str]], lower_bounds: Optional[Mapping[str, Mapping[str, Mapping[str, float]]]] = None,
              meta: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """``roles``: solution name -> {"label": ..., "role": "solution"|"baseline"|"lower_bound"}."""
    out: Dict[str, Any] = {"meta": meta or {}, "definitions": {}}
    for def_name, items in traces.items():
        builtin = builtins.get(def_name)
        by_sol: Dict[str, Dict[str, Trace]] = {}
        for t in items:
            by_sol.setdefault(t.solution, {})[t.workload.uuid] = t
        workloads = {t.workload.uuid: t.workload for t in items}
        regime_of = {u: (builtin.regime_of(w) if builtin else "all") for u, w in workloads.items()}
        present = set(regime_of.values())
        order = [r for r in (builtin.all_regimes_order if builtin else []) if r in present]
        order += sorted(present - set(order))
        lat = {s: {u: t.evaluation.performance.latency_ms for u, t in per.items() if t.trusted_pass}
               for s, per in by_sol.items()}
        solutions = {}
        baselines = [s for s in by_sol if roles.get(s, {}).get("role") == "baseline"]
        for sol, per in by_sol.items():
            passed = [t for t in per.values() if t.passed]
            trusted = [t for t in passed if t.trusted_pass]
            failed = [{"workload": u, "status": t.evaluation.status.value,
                       "reasons": t.evaluation.gate.reasons if t.evaluation.gate else [],
                       "detail": failure_detail(t)}
                      for u, t in per.items() if not t.trusted_pass]
            stats = {}
            for r in order:
                ts = [t for u, t in per.items() if t.trusted_pass and regime_of[u] == r]
                if ts:
                    stats[r] = _regime_stats(ts)
            regimes = {r: st["latency_us"] for r, st in stats.items()}
            vs = {}
            for base in baselines:
                if base == sol:
                    continue
                common = [u for u in lat[sol] if u in lat.get(base, {})]
                if common:
                    vs[base] = {"mean_speedup": _mean([lat[base][u] / lat[sol][u] for u in common]),
                                "workloads": len(common)}
            best_vs = _vs_fastest_baseline(lat, sol, [b for b in baselines if b != sol], regime_of, order)
            for lb_name, lb in (lower_bounds or {}).get(def_name, {}).items():
                common = [u for u in lat[sol] if lb.get(u)]
                if common:
                    vs[lb_name] = {"mean_speedup": _mean([lb[u] / lat[sol][u] for u in common]), "workloads": len(common),
                                   "lower_bound": True}
            fractions = [t.evaluation.gate.roofline_fraction for t in trusted
                         if t.evaluation.gate and t.evaluation.gate.roofline_fraction is not None]
            graph = [t.evaluation.performance.graph_latency_ms for t in trusted if t.evaluation.performance.graph_latency_ms]
            eager = [t.evaluation.performance.eager_latency_ms for t in trusted if t.evaluation.performance.eager_latency_ms]
            clocks: Dict[str, int] = {}
            for t in trusted:
                c = t.evaluation.performance.clock or "eager"
                clocks[c] = clocks.get(c, 0) + 1
            solutions[sol] = {
                "judged_by": judged_by_summary(list(per.values())),
                "label": roles.get(sol, {}).get("label", sol),
                "role": roles.get(sol, {}).get("role", "solution"),
                "workloads": len(per),
                "passed": len(trusted),
                "suspicious": len(passed) - len(trusted),
                "all_passed": len(trusted) == len(per),
                "mean_latency_us": _mean([t.evaluation.performance.latency_ms * 1e3 for t in trusted]),
                "clocks": clocks,
                "mean_eager_latency_us": _mean([e * 1e3 for e in eager]),
                "mean_graph_latency_us": _mean([g * 1e3 for g in graph]),
                "regime_latency_us": regimes,
                "regime_stats": stats,
                "mean_speedup_vs_reference": _mean([t.evaluation.performance.speedup_factor for t in trusted]),
                "speedup_vs": vs,
                "regime_speedup_vs_fastest_baseline": best_vs,
                "mean_roofline_fraction": _mean(fractions),
                "min_roofline_fraction": min(fractions) if fractions else None,
                "verdict": _verdict_stats(passed),
                "isolation": _isolation_levels(per.values()),
                "failures": failed[:50],
            }
        rows = []
        for u, w in workloads.items():
            row = {"uuid": u, "axes": dict(w.axes), "regime": regime_of[u], "latency_us": {}, "eager_us": {},
                   "graph_us": {}, "clock": {}, "roofline_fraction": {}, "status": {}, "reasons": {}, "detail": {}}
            if builtin is not None and builtin.size_axis is not None:
                row["x"] = float(builtin.size_axis[1](w.axes))
            if builtin is not None and builtin.sweep_series is not None and is_sweep(u):
                row["series"] = builtin.sweep_series(w)
            for sol, per in by_sol.items():
                t = per.get(u)
                if t is None:
                    continue
                row["status"][sol] = t.evaluation.status.value + ("*" if t.passed and not t.trusted_pass else "")
                if t.evaluation.gate and t.evaluation.gate.reasons:
                    row["reasons"][sol] = list(t.evaluation.gate.reasons)
                if not t.passed:
                    row["detail"][sol] = failure_detail(t)
                if t.passed:
                    perf = t.evaluation.performance
                    row["latency_us"][sol] = perf.latency_ms * 1e3
                    row["clock"][sol] = perf.clock or "eager"
                    if perf.eager_latency_ms:
                        row["eager_us"][sol] = perf.eager_latency_ms * 1e3
                    if perf.graph_latency_ms:
                        row["graph_us"][sol] = perf.graph_latency_ms * 1e3
                    if t.evaluation.gate and t.evaluation.gate.roofline_fraction is not None:
                        row["roofline_fraction"][sol] = t.evaluation.gate.roofline_fraction
                    if t.evaluation.gate and t.evaluation.gate.roofline_floor_ms is not None:
                        row["floor_us"] = t.evaluation.gate.roofline_floor_ms * 1e3
            for lb_name, lb in (lower_bounds or {}).get(def_name, {}).items():
                if lb.get(u):
                    row["latency_us"][lb_name] = lb[u] * 1e3
            rows.append(row)
        out["definitions"][def_name] = {"regimes": order, "solutions": solutions, "workloads": rows,
                                        "size_axis": builtin.size_axis[0] if builtin and builtin.size_axis else None,
                                        "lower_bounds": {k: roles.get(k, {}).get("label", k)
                                                         for k in (lower_bounds or {}).get(def_name, {})}}
    return out


def results_trace_files(results) -> List[Path]:
    """The trace files of a results folder: ``traces/*.jsonl``, or ``*.jsonl`` beside the summary
    as in the committed records; empty when it has none."""
    results = Path(results)
    return sorted((results / "traces").glob("*.jsonl")) or sorted(results.glob("*.jsonl"))


def summarize_folder(results) -> Dict[str, Any]:
    """Rebuild ``summary.json`` of a results folder from its traces (``traces/*.jsonl``, or
    ``*.jsonl`` beside the summary as in the committed records), ``candidates.json`` and
    ``lower_bounds.json`` (e.g. after an interrupted run, or for fields added since the run).
    Raises FileNotFoundError without traces."""
    import json

    from kernelwright import definitions
    from kernelwright.trace.trace_set import traces_by_definition

    results = Path(results)
    files = results_trace_files(results)
    if not files:
        raise FileNotFoundError(f"{results}: no traces/*.jsonl or *.jsonl")
    traces = traces_by_definition(files)
    roles_path, lb_path = results / "candidates.json", results / "lower_bounds.json"
    roles = json.loads(roles_path.read_text()) if roles_path.exists() else {}
    lower = json.loads(lb_path.read_text()) if lb_path.exists() else {}
    builtins = {}
    for name in traces:
        try:
            builtins[name] = definitions.get(name)
        except definitions.UnknownDefinition:
            pass
    meta = {"rebuilt_from_traces": True,
            "skipped": {v["label"]: v["skip_reason"] for v in roles.values() if v.get("skip_reason")}}
    return summarize(traces, builtins, roles, lower, meta)


def load_summary(path) -> Dict[str, Any]:
    """A ``summary.json`` written by bench or eval: an object whose ``definitions`` map each
    definition to an object with a ``solutions`` object.

    Raises:
        DataFileError: not valid JSON, or not of that shape (the message names the file).
    """
    import json

    from kernelwright.trace.jsonio import DataFileError

    try:
        summary = json.loads(Path(path).read_text())
    except json.JSONDecodeError as exc:
        raise DataFileError(f"{path}: malformed JSON ({exc.msg}, line {exc.lineno})") from None
    defs = summary.get("definitions") if isinstance(summary, dict) else None
    if not isinstance(defs, dict) or not all(isinstance(d, dict) and isinstance(d.get("solutions"), dict)
                                             for d in defs.values()):
        raise DataFileError(f"{path}: not a kernelwright summary (expected an object whose 'definitions' "
                            "map to objects with 'solutions')")
    return summary


def with_regime_stats(summary: Dict[str, Any], results) -> Dict[str, Any]:
    """``summary`` itself when it has ``regime_stats``; else (written before the field existed) the
    summary recomputed in memory from the traces in the folder ``results``; ``summary`` when that
    folder has no traces.  Nothing is written."""
    if any("regime_stats" in sol for d in summary["definitions"].values() for sol in d["solutions"].values()):
        return summary
    try:
        return summarize_folder(results)
    except FileNotFoundError:
        return summary


def with_failure_details(summary: Dict[str, Any], results) -> Dict[str, Any]:
    """``summary`` with each failed workload's one-line reason (``detail`` in its rows): a summary
    written before the field existed gets it from the folder's traces (nothing is written)."""
    rows = [r for d in summary["definitions"].values() for r in d["workloads"]]
    if all("detail" in r for r in rows):
        return summary
    try:
        fresh = summarize_folder(results)
    except FileNotFoundError:
        return summary
    for name, d in summary["definitions"].items():
        by_uuid = {r["uuid"]: r for r in fresh["definitions"].get(name, {}).get("workloads", [])}
        for r in d["workloads"]:
            r["detail"] = by_uuid.get(r["uuid"], {}).get("detail", {})
    return summary
