"""HTML report of a results folder: latency per workload per solution, and roofline fraction.

Plots are matplotlib PNGs embedded as base64, so the page is one self-contained file.
"""

from __future__ import annotations

import base64
import html
import io
import json
from pathlib import Path
from typing import Any, Dict, Optional


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode()


def _workload_label(axes: Dict[str, int]) -> str:
    return ",".join(f"{k[:1]}{v}" for k, v in axes.items() if not k.startswith("num_pages"))


def _failed(row: Dict[str, Any], names) -> bool:
    """Whether any solution failed this workload (a status other than PASSED)."""
    return any(not row["status"][n].startswith("PASSED") for n in names if n in row.get("status", {}))


def _mark_failed(ax, xs) -> None:
    """Failed workloads get no latency point: a red cross on the x axis says where they are."""
    if xs:
        ax.plot(xs, [0.0] * len(xs), "x", color="#c00", ms=6, clip_on=False,
                transform=ax.get_xaxis_transform(), label="failed (no latency point)")


def _latency_by_workload(ax, rows, names, label_of) -> None:
    """Latency per workload in axis order (definitions without a size axis); failed workloads
    have no point, a red cross on the axis and a red tick label."""
    for name in names:
        xs = [i for i, r in enumerate(rows) if name in r["latency_us"]]
        if xs:
            ax.plot(xs, [rows[i]["latency_us"][name] for i in xs], marker="o", ms=3, lw=1, label=label_of.get(name, name))
    floors = [(i, r["floor_us"]) for i, r in enumerate(rows) if r.get("floor_us")]
    if floors:
        ax.plot([i for i, _ in floors], [f for _, f in floors], "k--", lw=1, label="roofline floor")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([_workload_label(r["axes"]) for r in rows], rotation=90, fontsize=6)
    failed = [i for i, r in enumerate(rows) if _failed(r, names)]
    for i in failed:
        ax.get_xticklabels()[i].set_color("#c00")
    _mark_failed(ax, failed)
    ax.set_xlabel("workload (axis values; red: failed)")


def _latency_by_size(ax, rows, names, label_of, x_label: str) -> None:
    """Latency against the definition's size axis (context length, tokens): one colour per
    solution, one line style per series (e.g. batch size); the roofline floor per series in black.
    Workloads that share an x within a series (the contest sets) are drawn as points."""
    import itertools

    series = sorted({r.get("series", "") for r in rows}, key=lambda k: (len(k), k))
    styles = dict(zip(series, itertools.cycle(["-", "--", ":", "-.", (0, (3, 1, 1, 1))])))
    colors = dict(zip(names, itertools.cycle([f"C{i}" for i in range(10)])))
    for name in names:
        for k in series:
            pts = sorted((r["x"], r["latency_us"][name]) for r in rows
                         if r.get("series", "") == k and name in r["latency_us"])
            if not pts:
                continue
            unique = len({x for x, _ in pts}) == len(pts)
            label = label_of.get(name, name) + (f" ({k})" if k else "")
            ax.plot([x for x, _ in pts], [y for _, y in pts], ls=styles[k] if unique else "none", marker="o", ms=3,
                    lw=1, color=colors[name], label=label)
    for k in series:
        floor = sorted({(r["x"], r["floor_us"]) for r in rows if r.get("series", "") == k and r.get("floor_us")})
        if floor:
            ax.plot([x for x, _ in floor], [f for _, f in floor], color="k", ls=styles[k], lw=0.8, alpha=0.6,
                    marker="." if len({x for x, _ in floor}) < len(floor) else None,
                    label="roofline floor" + (f" ({k})" if k else ""))
    _mark_failed(ax, [r["x"] for r in rows if _failed(r, names)])
    ax.set_xscale("log", base=2)
    ax.set_xlabel(x_label)


def _plots(def_name: str, d: Dict[str, Any]) -> list:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(d["workloads"], key=lambda r: tuple(r["axes"].values()))
    names = list(d["solutions"]) + list(d.get("lower_bounds", {}))
    label_of = {**{k: v["label"] for k, v in d["solutions"].items()}, **d.get("lower_bounds", {})}
    by_size = bool(rows) and all("x" in r for r in rows)
    images = []
    fig, ax = plt.subplots(figsize=(10 if by_size else max(8, 0.18 * len(rows) + 4), 4.8))
    if by_size:
        _latency_by_size(ax, rows, names, label_of, d.get("size_axis") or "size")
    else:
        _latency_by_workload(ax, rows, names, label_of)
    if not any(line.get_label() != "failed (no latency point)" for line in ax.lines):
        ax.text(0.5, 0.5, "no passing workload", ha="center", va="center", transform=ax.transAxes)
    ax.set_yscale("log")
    ax.set_ylabel("latency (µs, log; device time on CUDA)")
    ax.set_title(f"{def_name}: latency (headline clock; failed workloads have no point)")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=6, ncol=2)
    ax.grid(alpha=0.3, which="both")
    images.append(_png(fig))
    fig, ax = plt.subplots(figsize=(max(8, 0.18 * len(rows) + 4), 3.6))
    for name in d["solutions"]:
        xs = [i for i, r in enumerate(rows) if name in r["roofline_fraction"]]
        if xs:
            ax.plot(xs, [rows[i]["roofline_fraction"][name] for i in xs], marker="o", ms=3, lw=1, label=label_of[name])
    if not ax.lines:
        ax.text(0.5, 0.5, "no roofline (CPU run or no device ceilings)", ha="center", va="center", transform=ax.transAxes)
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("fraction of roofline")
    ax.set_xlabel("workload")
    ax.set_title(f"{def_name}: roofline fraction (floor latency / measured latency)")
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels([_workload_label(r["axes"]) for r in rows], rotation=90, fontsize=6)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    images.append(_png(fig))
    return images


def _workload_table(d: Dict[str, Any]) -> str:
    """One row per workload: each solution's status (with its reasons when it failed) or its
    device / eager / graph µs."""
    sols = d["solutions"]
    head = ["workload", "regime", "axes"] + [s["label"] for s in sols.values()] + ["floor µs"]
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for r in d["workloads"]:
        cells = [html.escape(r["uuid"][:36]), html.escape(r["regime"]),
                 html.escape(", ".join(f"{k}={v}" for k, v in r["axes"].items()))]
        for name in sols:
            status = r["status"].get(name)
            if status is None:
                cells.append("")
            elif name in r["latency_us"]:
                extra = " / ".join(f"{r[k][name]:.1f}" if name in r.get(k, {}) else "—" for k in ("eager_us", "graph_us"))
                clock = r.get("clock", {}).get(name, "")
                flag = "*" if status.endswith("*") else ""
                cells.append(f"{r['latency_us'][name]:.1f}{flag} <small>({html.escape(clock)}; eager / graph {extra})</small>")
            else:
                why = ",".join(r.get("reasons", {}).get(name, []))
                detail = r.get("detail", {}).get(name) or ""
                cells.append(f"<span style='color:#b00'>{html.escape(status)} {html.escape(why)}</span>"
                             + (f"<br><small>{html.escape(detail)}</small>" if detail else ""))
        cells.append("—" if not r.get("floor_us") else f"{r['floor_us']:.1f}")
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</table><p><small>* passed but SUSPICIOUS (kept out of every best-of selection); a failed "
               "workload shows its status, the gate's codes and the reason in one line</small></p>")
    return "\n".join(out)


def _table(d: Dict[str, Any]) -> str:
    regimes = d["regimes"]
    from kernelwright.report.tables import headline_header

    head = (["solution", "passed", headline_header(d), "eager µs", "graph µs"] + [f"{r} µs" for r in regimes]
            + ["× reference", "vs baselines", "roofline mean/min"])
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for s in d["solutions"].values():
        f = lambda x, spec=".1f": "—" if x is None else format(x, spec)
        vs = "; ".join(f"{html.escape(d['solutions'].get(k, {}).get('label', d.get('lower_bounds', {}).get(k, k)))}: "
                       f"{v['mean_speedup']:.2f}×" for k, v in s["speedup_vs"].items())
        frac = "—" if s["mean_roofline_fraction"] is None else f"{s['mean_roofline_fraction']:.2f} / {s['min_roofline_fraction']:.2f}"
        cells = [html.escape(s["label"]), f"{s['passed']}/{s['workloads']}", f(s["mean_latency_us"]),
                 f(s.get("mean_eager_latency_us")), f(s.get("mean_graph_latency_us"))]
        cells += [f(s["regime_latency_us"].get(r)) for r in regimes]
        cells += [f(s["mean_speedup_vs_reference"]), vs or "—", frac]
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def _regime_table(d: Dict[str, Any]) -> str:
    """Per solution and regime: workloads, mean latency (µs), achieved HBM bandwidth (TB/s) and
    FLOP rate (TFLOP/s), speedup over the PyTorch reference (summaries without ``regime_stats``,
    written before it existed, give an empty string)."""
    rows = [(s["label"], r, st) for s in d["solutions"].values()
            for r, st in (s.get("regime_stats") or {}).items()]
    if not rows:
        return ""
    head = ["solution", "regime", "workloads", "latency µs", "achieved TB/s", "achieved TFLOP/s", "× reference"]
    f = lambda x, spec: "—" if x is None else format(x, spec)
    out = ["<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>"]
    for label, regime, st in rows:
        cells = [html.escape(label), html.escape(regime), str(st["workloads"]), f(st["latency_us"], ".1f"),
                 f(st["achieved_TBps"], ".2f"), f(st["achieved_TFLOPs"], ".1f"), f(st["speedup_vs_reference"], ".1f")]
        out.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    out.append("</table>")
    return "\n".join(out)


def write_report(results: Path, out: Optional[Path] = None) -> Path:
    """Render ``results/summary.json`` to HTML.  Raises FileNotFoundError without a summary."""
    summary_path = Path(results) / "summary.json"
    if summary_path.is_file():
        from kernelwright.report.summary import load_summary

        summary = load_summary(summary_path)
    elif (Path(results) / "traces").is_dir():
        from kernelwright.report.summary import summarize_folder

        summary = summarize_folder(results)  # an interrupted run: rebuild from its traces
        summary_path.write_text(json.dumps(summary, indent=1, default=str) + "\n")
    else:
        raise FileNotFoundError(f"{results}: no summary.json or traces (run kernelwright bench or eval first)")
    from kernelwright.report.summary import with_failure_details, with_regime_stats

    regime_source = with_regime_stats(summary, results)
    summary = with_failure_details(summary, results)
    meta = summary.get("meta", {})
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>kernelwright report</title>",
             "<style>body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px}"
             "table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right}"
             "td:first-child,th:first-child{text-align:left}img{max-width:100%}</style></head><body>",
             "<h1>kernelwright results</h1>",
             f"<p><code>{html.escape(str(meta.get('command', '')))}</code><br>{html.escape(str(meta.get('date', '')))} · "
             f"{html.escape(str(meta.get('environment', {}).get('hardware', '')))} · "
             f"{html.escape(json.dumps(meta.get('environment', {}).get('libs', {})))}</p>"]
    for def_name, d in summary["definitions"].items():
        parts.append(f"<h2>{html.escape(def_name)}</h2>")
        parts.append(_table(d))
        parts.append(_regime_table(regime_source["definitions"].get(def_name, d)))
        for img in _plots(def_name, d):
            parts.append(f"<img src='{img}'>")
        parts.append("<h3>per workload</h3>")
        parts.append(_workload_table(d))
    skipped = meta.get("skipped") or {}
    if skipped:
        parts.append("<h3>not run</h3><ul>" + "".join(f"<li>{html.escape(k)}: {html.escape(str(v))}</li>"
                                                     for k, v in skipped.items()) + "</ul>")
    parts.append("</body></html>")
    out = Path(out) if out else Path(results) / "report.html"
    out.write_text("\n".join(parts))
    return out
