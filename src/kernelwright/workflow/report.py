"""HTML report of an optimisation run (``kernelwright run report RUN``).

One self-contained page (matplotlib PNGs embedded as base64) with:

* the best speedup over the run's time and over the tokens spent (the paper's curves): a
  step for every promotion, invalidated promotions greyed out;
* per-workload latency of the current best against the reference, the starting solution and
  any baselines timed with it;
* the candidate lineage (every candidate that passed a check, its parents, its fate);
* tokens and device time by role and by agent;
* the cycles, attempts, directions and operator events as tables.
"""

from __future__ import annotations

import base64
import html
import io
import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

from kernelwright.workflow import runs
from kernelwright.workflow.state import State, loads

STATUS_COLORS = {"promoted": "#2a9d4b", "not_better": "#e0a100", "rejected": "#c0392b", "skipped": "#999999",
                 "checked": "#5b8def", "pending_final": "#5b8def", "evaluating": "#5b8def", "invalidated": "#555555"}


def _png(fig) -> str:
    import matplotlib.pyplot as plt

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _curve_points(state: State) -> List[Dict[str, Any]]:
    rows = state.rows("SELECT p.*, c.origin FROM promotions p JOIN candidates c ON c.id=p.candidate_id ORDER BY p.id")
    return [dict(r) for r in rows]


def _step(points, key_x, key_y, end_x):
    xs, ys = [], []
    for p in points:
        if p["invalidated_at"] is not None or p[key_y] is None:
            continue
        if xs:
            xs.append(p[key_x])
            ys.append(ys[-1])
        xs.append(p[key_x])
        ys.append(p[key_y])
    if xs:
        xs.append(max(end_x, xs[-1]))
        ys.append(ys[-1])
    return xs, ys


def plot_curves(state: State) -> List[str]:
    """Best speedup over orchestrator time (minutes) and over tokens.

    Solid: improvement over the first best (the starting solution when it passed), the product
    of the side-by-side ratios measured at each promotion, so that drift in absolute timings
    between evaluations does not bend the curve.  Markers (right axis): the speedup vs the
    PyTorch reference recorded by each promotion's final evaluation (mean over workloads).
    """
    plt = _plt()
    points = _curve_points(state)
    if not points:
        return []
    chain = runs.chained_improvement(points)
    for p in points:
        p["minutes"] = p["active_s"] / 60.0
        p["chain"] = chain.get(p["candidate_id"])
    run = state.run()
    totals = state.totals()
    images = []
    for key_x, end_x, xlabel, title in (
            ("minutes", run["active_s"] / 60.0, "orchestrator time (minutes)", "best speedup over time"),
            ("tokens", totals["tokens"], "tokens spent (all agents)", "best speedup over tokens")):
        fig, ax = plt.subplots(figsize=(7.5, 3.6))
        xs, ys = _step(points, key_x, "chain", end_x)
        ax.plot(xs, ys, color="#2a9d4b", lw=2, label="× first best (chained side-by-side ratios)")
        for p in points:
            if p["chain"] is None and p["invalidated_at"] is None:
                continue
            gone = p["invalidated_at"] is not None
            y = p["chain"] if not gone else None
            if y is not None:
                ax.plot([p[key_x]], [y], "o", ms=7, color="#2a9d4b")
                ax.annotate(f"c{p['candidate_id']}", (p[key_x], y), textcoords="offset points", xytext=(4, 4),
                            fontsize=7)
        ax.set_xlabel(xlabel)
        ax.set_ylabel("× first best")
        ax.grid(alpha=0.3)
        ax2 = ax.twinx()
        sx = [p[key_x] for p in points if p["speedup"] is not None]
        sy = [p["speedup"] for p in points if p["speedup"] is not None]
        gone = [p["invalidated_at"] is not None for p in points if p["speedup"] is not None]
        if sx:
            ax2.plot(sx, sy, ls=":", color="#1f5fbf", lw=1, label="× PyTorch reference (as measured)")
            ax2.scatter(sx, sy, marker="s", s=22, c=["#bbbbbb" if g else "#1f5fbf" for g in gone])
        ax2.set_ylabel("speedup vs reference", color="#1f5fbf")
        ax.set_title(title)
        h1, l1 = ax.get_legend_handles_labels()
        h2, l2 = ax2.get_legend_handles_labels()
        ax.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper left")
        images.append(_png(fig))
    return images


def plot_workloads(state: State) -> Optional[str]:
    """Per-workload latency of the best vs the reference, the starting solution and baselines."""
    plt = _plt()
    b = runs.best(state)
    if b is None:
        return None
    rows = b["final"].get("public", {}).get("workloads", [])
    if not rows:
        return None
    start = runs.start_candidate(state)
    series = {f"best c{b['id']}": {r["uuid"]: r["latency_ms"] for r in rows},
              "reference": {r["uuid"]: r["reference_latency_ms"] for r in rows}}
    if start and start["id"] != b["id"]:
        series["starting solution"] = {r["uuid"]: r["latency_ms"]
                                       for r in start["final"].get("public", {}).get("workloads", []) if r["latency_ms"]}
    for label, summ in ((start or {}).get("final", {}).get("baselines") or {}).items():
        series[label] = {r["uuid"]: r["latency_ms"] for r in summ.get("workloads", []) if r.get("latency_ms")}
    labels = [",".join(f"{k[:1]}{v}" for k, v in r["axes"].items()) for r in rows]
    fig, ax = plt.subplots(figsize=(max(7, 0.25 * len(rows) + 4), 3.8))
    for name, data in series.items():
        xs = [i for i, r in enumerate(rows) if data.get(r["uuid"])]
        ax.plot(xs, [data[rows[i]["uuid"]] * 1e3 for i in xs], marker="o", ms=4, lw=1, label=name)
    ax.set_yscale("log")
    ax.set_ylabel("latency (µs, log)")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=90, fontsize=7)
    ax.set_title("per-workload latency: current best vs reference, start and baselines")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _png(fig)


def plot_lineage(state: State) -> Optional[str]:
    """Candidates in creation order (x) by latency (y, log); arrows from parents."""
    plt = _plt()
    cands = [runs.candidate(state, r["id"]) for r in state.rows("SELECT id FROM candidates ORDER BY id")]
    if not cands:
        return None
    pos = {}
    for c in cands:
        lat = c.get("mean_latency_ms")
        if lat is None and c.get("attempt_id"):
            check = loads(state.value("SELECT check_json FROM attempts WHERE id=?", c["attempt_id"]), {})
            lat = check.get("public", {}).get("mean_latency_ms")
        if lat:
            pos[c["id"]] = (c["id"], lat * 1e3)
    if not pos:
        return None
    fig, ax = plt.subplots(figsize=(max(6, 0.5 * len(cands) + 3), 3.8))
    for c in cands:
        if c["id"] not in pos:
            continue
        x, y = pos[c["id"]]
        for p in c["parents"]:
            if p in pos:
                ax.annotate("", xy=(x, y), xytext=pos[p], arrowprops={"arrowstyle": "->", "color": "#888", "lw": 0.8})
        color = STATUS_COLORS.get(c["status"], "#333")
        ax.plot([x], [y], "*" if c["status"] == "promoted" else "o", ms=12 if c["status"] == "promoted" else 7,
                color=color)
        tag = f"c{c['id']}" + (f"\n(a{c['attempt_id']})" if c.get("attempt_id") else f"\n({c['origin']})")
        ax.annotate(tag, (x, y), textcoords="offset points", xytext=(5, -2), fontsize=7)
    for status, color in STATUS_COLORS.items():
        if any(c["status"] == status for c in cands):
            ax.plot([], [], "o", color=color, label=status)
    ax.set_yscale("log")
    ax.set_xlabel("candidate")
    ax.set_ylabel("mean latency (µs, final or check)")
    ax.set_title("candidate lineage")
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return _png(fig)


def usage_by_role(state: State) -> Dict[str, Dict[str, float]]:
    out: Dict[str, Dict[str, float]] = {}
    for r in state.rows("SELECT role, SUM(input_tokens) i, SUM(output_tokens) o, SUM(cache_read_tokens) cr, "
                        "SUM(cache_write_tokens) cw, SUM(cost_usd) cost, SUM(duration_s) d, COUNT(*) n "
                        "FROM turns GROUP BY role"):
        out[r["role"]] = {"input": r["i"] or 0, "output": r["o"] or 0, "cache_read": r["cr"] or 0,
                          "cache_write": r["cw"] or 0, "cost_usd": r["cost"] or 0.0, "turn_s": r["d"] or 0.0,
                          "turns": r["n"], "device_s": 0.0}
    for r in state.rows("SELECT role, SUM(seconds) s FROM device_usage WHERE kind != 'turn' GROUP BY role"):
        out.setdefault(r["role"], {"input": 0, "output": 0, "cache_read": 0, "cache_write": 0, "cost_usd": 0.0,
                                   "turn_s": 0.0, "turns": 0, "device_s": 0.0})["device_s"] = r["s"] or 0.0
    return out


def plot_usage(state: State) -> Optional[str]:
    plt = _plt()
    use = usage_by_role(state)
    if not use:
        return None
    roles = sorted(use)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.4))
    bottom = [0.0] * len(roles)
    for key, color in (("input", "#1f5fbf"), ("cache_read", "#9ab8ef"), ("cache_write", "#c6d6f5"),
                       ("output", "#e07b00")):
        vals = [use[r][key] for r in roles]
        ax1.bar(roles, vals, bottom=bottom, color=color, label=key.replace("_", " "))
        bottom = [b + v for b, v in zip(bottom, vals)]
    ax1.set_title("tokens by role")
    ax1.legend(fontsize=7)
    ax1.tick_params(axis="x", labelsize=8)
    ax2.bar(roles, [use[r]["device_s"] for r in roles], color="#2a9d4b", label="device (GPU) seconds")
    ax2.bar(roles, [use[r]["turn_s"] for r in roles], color="#999", alpha=0.5, label="agent turn seconds")
    ax2.set_title("time by role")
    ax2.legend(fontsize=7)
    ax2.tick_params(axis="x", labelsize=8)
    return _png(fig)


def _table(head: List[str], rows: List[List[Any]]) -> str:
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for r in rows:
        out.append("<tr>" + "".join(f"<td>{html.escape('' if c is None else str(c))}</td>" for c in r) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _f(x, spec=".3f"):
    return "" if x is None else format(x, spec)


def write_run_report(run_dir: Path, out: Optional[Path] = None) -> Path:
    """Write the run's HTML report; returns its path.  Raises StateError for a non-run folder."""
    state = State(Path(run_dir))
    run = state.run()
    cfg = json.loads(run["config_json"])
    b = runs.best(state)
    start = runs.start_candidate(state)
    totals = state.totals()
    imp = runs.improvement_over_start(state)
    parts = ["<!doctype html><html><head><meta charset='utf-8'>",
             f"<title>kernelwright run {html.escape(run['id'])}</title>",
             "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1300px}"
             "table{border-collapse:collapse;margin:1em 0;font-size:13px}td,th{border:1px solid #ccc;padding:3px 7px;"
             "vertical-align:top}img{max-width:100%}code{font-size:12px}</style></head><body>",
             f"<h1>kernelwright run {html.escape(run['id'])}</h1>",
             f"<p>definition <b>{html.escape(run['definition'])}</b> on {html.escape(cfg.get('device', ''))} · status "
             f"<b>{html.escape(run['status'])}</b>{' (' + html.escape(run['stop_reason']) + ')' if run['stop_reason'] else ''}"
             f" · created {time.strftime('%Y-%m-%d %H:%M', time.localtime(run['created_at']))}</p>"]
    summary = [["best candidate", f"c{b['id']} ({b['origin']})" if b else "none"],
               ["best speedup vs reference (mean over public workloads)", _f((b or {}).get("speedup"))],
               ["best mean latency (µs)", _f(((b or {}).get("mean_latency_ms") or 0) * 1e3, ".1f") if b else ""],
               ["improvement" + (f" over {imp['over']}" if imp else ""), f"x{imp['value']:.2f}" if imp else ""],
               ["how the improvement is computed", runs.IMPROVEMENT_HOW + " (the same figure as kernelwright run status)"],
               ["promotions (baseline included)", state.value("SELECT COUNT(*) FROM promotions WHERE invalidated_at IS NULL")],
               ["cycles / attempts / turns", f"{totals['cycles']} / {totals['attempts']} / {totals['turns']}"],
               ["tokens / cost (USD)", f"{totals['tokens']:,} / {totals['cost_usd']:.2f}"],
               ["orchestrator time / device time (s)", f"{run['active_s']:.0f} / {totals['device_s']:.0f}"]]
    parts.append(_table(["", ""], summary))
    images = plot_curves(state)
    if images:
        parts.append("<h2>Best speedup over time and over tokens</h2>")
        parts += [f"<img src='{i}'>" for i in images]
    img = plot_workloads(state)
    if img:
        parts += ["<h2>Per-workload latency</h2>", f"<img src='{img}'>"]
    img = plot_lineage(state)
    if img:
        parts += ["<h2>Candidate lineage</h2>", f"<img src='{img}'>"]
    cands = [runs.candidate(state, r["id"]) for r in state.rows("SELECT id FROM candidates ORDER BY id")]
    parts.append(_table(["candidate", "origin", "attempt", "parents", "status", "check ×best", "final ×best",
                         "speedup ×ref", "mean µs", "reason"],
                        [[f"c{c['id']}", c["origin"], f"a{c['attempt_id']}" if c["attempt_id"] else "",
                          ",".join(f"c{p}" for p in c["parents"]), c["status"], _f(c["check_ratio"]),
                          _f(c["improvement"]), _f(c["speedup"]),
                          _f((c["mean_latency_ms"] or 0) * 1e3, ".1f") if c["mean_latency_ms"] else "", c["reason"]]
                         for c in cands]))
    img = plot_usage(state)
    if img:
        parts += ["<h2>Tokens and time by role</h2>", f"<img src='{img}'>"]
    use = usage_by_role(state)
    parts.append(_table(["role", "turns", "input", "cache read", "cache write", "output", "cost USD", "turn s",
                         "device s"],
                        [[r, u["turns"], f"{u['input']:,}", f"{u['cache_read']:,}", f"{u['cache_write']:,}",
                          f"{u['output']:,}", f"{u['cost_usd']:.2f}", f"{u['turn_s']:.0f}", f"{u['device_s']:.0f}"]
                         for r, u in sorted(use.items())]))
    agents = state.rows("SELECT agent, backend, model, COUNT(*) n, SUM(input_tokens+output_tokens+cache_read_tokens+"
                        "cache_write_tokens) tok, SUM(cost_usd) cost FROM turns GROUP BY agent ORDER BY agent")
    parts.append(_table(["agent", "backend", "model", "turns", "tokens", "cost USD"],
                        [[a["agent"], a["backend"], a["model"], a["n"], f"{a['tok'] or 0:,}", f"{a['cost'] or 0:.2f}"]
                         for a in agents]))
    parts.append("<h2>Cycles and attempts</h2>")
    rows = []
    for c in runs.cycles_view(state):
        rows.append([f"cycle {c['idx']}", c["status"], f"base c{c['base_candidate']}" if c["base_candidate"] else "",
                     c.get("error") or ""])
        for a in c["attempts"]:
            rows.append([f"  a{a['id']}", a["agent"], a["direction"], f"{a['hypothesis'][:140]} → {a['result']}"])
    parts.append(_table(["", "", "", ""], rows))
    parts.append("<h2>Directions</h2>")
    parts.append(_table(["direction", "origin", "status", "consecutive fails", "research fails", "wins", "brief"],
                        [[d["name"], d["origin"], d["status"], d["failed_attempts"], d["research_failed_attempts"],
                          d["successes"], (d["research_brief"] or "")[:300]] for d in runs.directions_view(state)]))
    prof = runs.latest_profile(state, b["id"] if b else None)
    if prof:
        parts += ["<h2>Profile of the current best</h2>", f"<pre>{html.escape(prof)}</pre>"]
    ops = state.rows("SELECT * FROM operator_events ORDER BY id")
    if ops:
        parts.append("<h2>Operator actions</h2>")
        parts.append(_table(["time", "command", "arguments", "result"],
                            [[time.strftime("%H:%M:%S", time.localtime(o["at"])), o["command"], o["args_json"],
                              o["result"]] for o in ops]))
    events = state.rows("SELECT * FROM events ORDER BY id DESC LIMIT 60")
    parts.append("<h2>Latest events</h2>")
    parts.append(_table(["time", "kind", "message"],
                        [[time.strftime("%H:%M:%S", time.localtime(e["at"])), e["kind"], e["message"]]
                         for e in reversed(events)]))
    parts.append("</body></html>")
    out = Path(out) if out else Path(run_dir) / "report.html"
    out.write_text("\n".join(parts))
    return out
